// core/: canonical JSON, event envelope validation, ids, time.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/canonical_json.h"
#include "core/event.h"
#include "core/recent_set.h"
#include "core/sha256.h"

namespace tollgate {
namespace {

TEST(CanonicalJson, SortsKeysAndDropsWhitespace) {
  Json j;
  ASSERT_TRUE(ParseJson(R"({ "b": 1, "a": {"z": [1, 2.5, "x"], "y": null}, "é": true })", &j).ok());
  std::string out;
  ASSERT_TRUE(CanonicalBytes(j, &out).ok());
  EXPECT_EQ(out, R"({"a":{"y":null,"z":[1,2.5,"x"]},"b":1,"é":true})");
}

TEST(CanonicalJson, RoundTripsExactly) {
  const std::string inputs[] = {R"({"n":-0.1,"big":18446744073709551615,"neg":-9223372036854775808})",
                                R"({"s":"line\nbreak \"quoted\" \u0001 tab\t"})",
                                R"([1.0,1e300,0.30000000000000004])"};
  for (const auto& in : inputs) {
    Json j;
    ASSERT_TRUE(ParseJson(in, &j).ok());
    std::string once, twice;
    ASSERT_TRUE(CanonicalBytes(j, &once).ok());
    Json again;
    ASSERT_TRUE(ParseJson(once, &again).ok());
    ASSERT_TRUE(CanonicalBytes(again, &twice).ok());
    EXPECT_EQ(once, twice) << in;
  }
}

TEST(CanonicalJson, RefusesInvalidUtf8AndNonFinite) {
  std::string out;
  Status s = CanonicalBytes(Json{{"k", std::string("\xff\xfe")}}, &out);
  EXPECT_EQ(s.code(), "E_INVALID_UTF8");
  s = CanonicalBytes(Json{{"k", std::nan("")}}, &out);
  EXPECT_EQ(s.code(), "E_INVALID_JSON");
}

TEST(CanonicalJson, MalformedTextNamesTheOffset) {
  Json j;
  Status s = ParseJson(R"({"a": 1,, })", &j);
  EXPECT_EQ(s.code(), "E_INVALID_JSON");
  EXPECT_NE(s.message().find("byte 9"), std::string::npos) << s.message();
}

TEST(Sha256, KnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(ToHex(Sha256("ab", "c")), Sha256Hex("abc"));
  Digest d;
  EXPECT_TRUE(DigestFromHex(Sha256Hex("abc"), &d));
  EXPECT_FALSE(DigestFromHex("ABC", &d));
  EXPECT_FALSE(DigestFromHex(std::string(64, 'g'), &d));
}

Event Good() {
  Event e;
  e.type = "request.received";
  e.request_id = "r1";
  e.id = MakeEventId(e.type, e.request_id);
  e.time_us = 1'700'000'000'000'000;
  e.org_id = "o";
  e.agent_id = "a";
  e.session_id = "s";
  e.tool = "echo";
  e.data = {{"x", 1}};
  return e;
}

TEST(Event, IdsAreDeterministicAndDistinct) {
  EXPECT_EQ(MakeEventId("decision.made", "r1"), MakeEventId("decision.made", "r1"));
  EXPECT_NE(MakeEventId("decision.made", "r1"), MakeEventId("decision.made", "r2"));
  EXPECT_NE(MakeEventId("decision.made", "r1"), MakeEventId("request.received", "r1"));
  EXPECT_NE(MakeEventId("approval.granted", "r1", "alice"), MakeEventId("approval.granted", "r1", "bob"));
  // NUL separation: moving bytes between fields changes the id.
  EXPECT_NE(MakeEventId("a", "bc"), MakeEventId("ab", "c"));
  EXPECT_EQ(MakeEventId("x", "y").size(), 32u);
}

// request_ids are scoped by org: the same request_id in two orgs gives two
// requests whose events never share an id (so one org's events can neither
// collide with nor de-duplicate another's).
TEST(Event, RequestEventIdsAreScopedByOrg) {
  EXPECT_EQ(MakeRequestEventId("o1", "decision.made", "r1"), MakeRequestEventId("o1", "decision.made", "r1"));
  EXPECT_NE(MakeRequestEventId("o1", "decision.made", "r1"), MakeRequestEventId("o2", "decision.made", "r1"));
  EXPECT_NE(MakeRequestEventId("o1", "decision.made", "r1"), MakeRequestEventId("o1", "decision.made", "r2"));
  EXPECT_NE(MakeRequestEventId("o1", "approval.granted", "r1", "alice"),
            MakeRequestEventId("o1", "approval.granted", "r1", "bob"));
  EXPECT_NE(MakeRequestEventId("o1", "decision.made", "r1"), MakeEventId("decision.made", "r1"));
  // NUL separation: moving bytes between org and request changes the id.
  EXPECT_NE(MakeRequestEventId("o", "decision.made", "1r"), MakeRequestEventId("o1", "decision.made", "r"));
  EXPECT_NE(MakeRequestEventId("ab", "t", "c"), MakeRequestEventId("a", "t", "bc"));
  EXPECT_EQ(MakeRequestEventId("o", "t", "r").size(), 32u);
  EXPECT_NE(RequestKey("ab", "c"), RequestKey("a", "bc"));
  EXPECT_EQ(RequestKey("o1", "r1"), RequestKey("o1", "r1"));
}

TEST(Event, RecordJsonRoundTrips) {
  Event e = Good();
  e.seq = 7;
  e.prev_hash = std::string(64, 'a');
  e.hash = std::string(64, 'b');
  Event back;
  ASSERT_TRUE(EventFromJson(e.RecordJson(), &back).ok());
  EXPECT_EQ(back.seq, 7u);
  EXPECT_EQ(back.RecordJson(), e.RecordJson());
}

TEST(Event, EnvelopeErrorsNameTheField) {
  struct Case {
    std::function<void(Event&)> mutate;
    std::string code, needle;
  };
  const Case cases[] = {
      {[](Event& e) { e.type = "request.teleported"; }, "E_UNKNOWN_EVENT_TYPE", "request.teleported"},
      {[](Event& e) { e.type = ""; }, "E_INVALID_EVENT", "'type'"},
      {[](Event& e) { e.org_id = ""; }, "E_INVALID_EVENT", "'org_id'"},
      {[](Event& e) { e.request_id = ""; }, "E_INVALID_EVENT", "'request_id'"},
      {[](Event& e) { e.session_id = std::string(300, 's'); }, "E_INVALID_EVENT", "'session_id'"},
      {[](Event& e) { e.agent_id = std::string("a\0b", 3); }, "E_INVALID_EVENT", "control character"},
      {[](Event& e) { e.data = Json::array(); }, "E_INVALID_EVENT", "'data'"},
      {[](Event& e) { e.time_us = 0; }, "E_INVALID_EVENT", "'time'"},
  };
  for (const auto& c : cases) {
    Event e = Good();
    c.mutate(e);
    Status s = ValidateEnvelope(e);
    EXPECT_EQ(s.code(), c.code) << c.needle;
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
  }
  Event policy = Good();
  policy.type = "policy.updated";
  policy.request_id = policy.session_id = policy.agent_id = "";
  EXPECT_TRUE(ValidateEnvelope(policy).ok()) << "policy.updated needs no request";
}

TEST(Event, FromJsonRefusesWrongTypesAndUnknownFields) {
  Json good = Good().BodyJson();
  Event parsed;
  ASSERT_TRUE(EventFromJson(good, &parsed).ok());
  struct Case {
    std::function<void(Json&)> mutate;
    std::string needle;
  };
  const Case cases[] = {
      {[](Json& j) { j["org_id"] = 5; }, "'org_id' must be a string"},
      {[](Json& j) { j["seq"] = -1; }, "'seq'"},
      {[](Json& j) { j["time"] = "yesterday"; }, "'time'"},
      {[](Json& j) { j.erase("data"); }, "'data' is required"},
      {[](Json& j) { j["extra"] = 1; }, "unknown envelope field 'extra'"},
      {[](Json& j) { j = Json::array(); }, "JSON object"},
  };
  for (const auto& c : cases) {
    Json j = good;
    c.mutate(j);
    Event e;
    Status s = EventFromJson(j, &e);
    EXPECT_FALSE(s.ok()) << c.needle;
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
  }
  Event e;
  EXPECT_EQ(EventFromText("{not json", &e).code(), "E_INVALID_JSON");
}

TEST(Event, EncodeBodyEnforcesTheSizeLimit) {
  Event e = Good();
  e.data = {{"blob", std::string(2000, 'x')}};
  std::string out;
  EXPECT_TRUE(EncodeEventBody(e, 4096, &out).ok());
  Status s = EncodeEventBody(e, 1024, &out);
  EXPECT_EQ(s.code(), "E_EVENT_TOO_LARGE");
  EXPECT_NE(s.message().find("limit 1024"), std::string::npos);
}

// The body is written field by field for speed; it must stay byte for byte
// the canonical JSON of BodyJson(), which is what the hash covers.
TEST(Event, EncodedBodyIsTheCanonicalJsonOfTheEnvelope) {
  const std::vector<std::string> odd = {"plain",       "",        "quote\"d",
                                        "back\\slash", "ünï",     "日本",
                                        "tab\tx",      "del\x7f", "emoji \xF0\x9F\x98\x80",
                                        "/slash",      "<>&'"};
  int n = 0;
  for (const std::string& v : odd) {
    Event e;
    e.seq = 42 + n;
    e.type = "decision.made";
    e.request_id = v.empty() ? "r" : "r-" + v;
    e.id = MakeEventId(e.type, e.request_id);
    e.time_us = 1'790'000'000'000'001 + n++;
    e.org_id = "org-" + v;
    e.agent_id = "a" + v;
    e.session_id = v;
    e.tool = v;
    e.data = {{"k", v}, {"n", 1.5}, {"nested", {{"z", 1}, {"a", {true, nullptr}}}}};
    std::string body, want;
    Status s = EncodeEventBody(e, 1 << 20, &body);
    Status valid = ValidateEnvelope(e);
    ASSERT_EQ(s.ok(), valid.ok()) << v << ": " << s.ToString();
    if (!s.ok()) continue;  // e.g. a control character in an id field
    ASSERT_TRUE(CanonicalBytes(e.BodyJson(), &want).ok());
    EXPECT_EQ(body, want) << v;
  }
}

TEST(Event, ScanEnvelopeReadsWhatEncodeWrites) {
  Event e;
  e.seq = 1234567;
  e.id = MakeEventId("decision.made", "r-1");
  e.type = "decision.made";
  e.time_us = 1'790'000'000'123'456;
  e.org_id = "acme";
  e.agent_id = "agent-ü";
  e.session_id = "s-1";
  e.request_id = "r-1";
  e.tool = "";
  e.data = {{"verdict", "allow"}, {"tricky", "}]{\"["}, {"list", {1, {{"k", "v"}}}}};
  std::string body;
  ASSERT_TRUE(EncodeEventBody(e, 1 << 20, &body).ok());
  EnvelopeView v;
  ASSERT_TRUE(ScanEnvelope(body, &v)) << body;
  EXPECT_EQ(v.seq, e.seq);
  EXPECT_EQ(v.id, e.id);
  EXPECT_EQ(v.type, e.type);
  EXPECT_EQ(v.time, FormatTime(e.time_us));
  EXPECT_EQ(v.org_id, e.org_id);
  EXPECT_EQ(v.agent_id, e.agent_id);
  EXPECT_EQ(v.session_id, e.session_id);
  EXPECT_EQ(v.request_id, e.request_id);
  EXPECT_EQ(v.tool, "");
  EXPECT_EQ(Json::parse(v.data), e.data);
  e.prev_hash = std::string(64, 'a');
  e.hash = std::string(64, 'b');
  std::string record;
  ASSERT_TRUE(CanonicalBytes(e.RecordJson(), &record).ok());
  EXPECT_EQ(RecordText(body, v, e.prev_hash, e.hash), record);

  // Anything but the writer's exact layout is left to the full decoder.
  e.session_id = "s\"1";  // an escape
  ASSERT_TRUE(EncodeEventBody(e, 1 << 20, &body).ok());
  EXPECT_FALSE(ScanEnvelope(body, &v));
  for (std::string bad : {std::string(""), std::string("{}"), std::string("[1]"), record,
                          body.substr(0, body.size() - 1), " " + body}) {
    EXPECT_FALSE(ScanEnvelope(bad, &v)) << bad;
  }
  e.session_id = "s1";
  ASSERT_TRUE(EncodeEventBody(e, 1 << 20, &body).ok());
  for (size_t cut = 0; cut < body.size(); ++cut) EXPECT_FALSE(ScanEnvelope(body.substr(0, cut), &v)) << cut;
}

TEST(Time, FormatAndParse) {
  EXPECT_EQ(FormatTime(0 + 1), "1970-01-01T00:00:00.000001Z");
  int64_t t;
  ASSERT_TRUE(ParseTime("2026-11-22T10:40:24.123456Z", &t));
  EXPECT_EQ(FormatTime(t), "2026-11-22T10:40:24.123456Z");
  ASSERT_TRUE(ParseTime("2026-11-22T11:40:24.5+01:00", &t));
  EXPECT_EQ(FormatTime(t), "2026-11-22T10:40:24.500000Z");
  ASSERT_TRUE(ParseTime("2024-02-29T00:00:00Z", &t));
  EXPECT_EQ(FormatTime(t), "2024-02-29T00:00:00.000000Z");
  for (const char* bad : {"2026-13-01T00:00:00Z", "2026-11-22 10:40:24Z", "2026-11-22T10:40:24",
                          "2026-11-22T10:40:24.Z", "2026-11-22T10:40:24Zjunk", ""}) {
    EXPECT_FALSE(ParseTime(bad, &t)) << bad;
  }
}

TEST(RecentSet, RemembersTheLastInsertionsAndForgetsTheOldestFirst) {
  RecentSet s(3);
  EXPECT_TRUE(s.insert("a"));
  EXPECT_FALSE(s.insert("a")) << "a repeat is not new";
  EXPECT_TRUE(s.insert("b"));
  EXPECT_TRUE(s.insert("c"));
  EXPECT_TRUE(s.insert("d"));  // "a" goes
  EXPECT_EQ(s.size(), 3u);
  EXPECT_FALSE(s.count("a"));
  EXPECT_TRUE(s.count("b") && s.count("c") && s.count("d"));
  EXPECT_TRUE(s.insert("a")) << "forgotten, so new again";
  EXPECT_FALSE(s.count("b"));
}

}  // namespace
}  // namespace tollgate
