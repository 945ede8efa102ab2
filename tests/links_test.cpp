// The log's completeness links (docs/log_format.md, "Links"): assigned on
// append, re-derived by verify, and checked offline by verify-proof's
// `complete`.
#include <gtest/gtest.h>

#include "audit/checkpointer.h"
#include "audit/event_log.h"
#include "audit/verify.h"
#include "audit/verify_proof.h"
#include "test_util.h"

namespace tollgate {
namespace {

using testing::MakeEvent;
using testing::TempDir;

std::unique_ptr<EventLog> OpenLog(const std::string& path) {
  std::unique_ptr<EventLog> log;
  Status s = EventLog::Open(path, LogOptions{}, &log);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return log;
}

uint64_t Append(EventLog& log, const Event& e) {
  AppendResult r = log.Append(e);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  return r.seq;
}

Event Read(EventLog& log, uint64_t seq) {
  Event e;
  Status s = log.store().ReadEvent(seq, &e);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return e;
}

Event PolicyUpdated() {
  Event e;
  e.type = ev::kPolicyUpdated;
  e.id = MakeEventId(e.type, "", "v1");
  e.org_id = "o1";
  e.time_us = 1'790'000'000'000'000;
  e.data = {{"policy_version", "v1"}};
  return e;
}

TEST(Links, EachEventNamesThePreviousEventOfItsRequestAndOfItsSession) {
  TempDir dir;
  auto log = OpenLog(dir.path());
  const uint64_t a1 = Append(*log, MakeEvent(ev::kRequestReceived, "r1", "s1"));
  const uint64_t b1 = Append(*log, MakeEvent(ev::kRequestReceived, "r2", "s1"));
  const uint64_t p = Append(*log, PolicyUpdated());
  const uint64_t a2 = Append(*log, MakeEvent(ev::kDecisionMade, "r1", "s1"));
  const uint64_t c1 = Append(*log, MakeEvent(ev::kRequestReceived, "r3", "s2"));

  EXPECT_EQ(Read(*log, a1).prev_in_request, 0u);
  EXPECT_EQ(Read(*log, a1).prev_in_session, 0u);
  EXPECT_EQ(Read(*log, b1).prev_in_request, 0u);
  EXPECT_EQ(Read(*log, b1).prev_in_session, a1);
  EXPECT_FALSE(Read(*log, p).prev_in_request.has_value());  // no request, no session: no links
  EXPECT_FALSE(Read(*log, p).prev_in_session.has_value());
  EXPECT_EQ(Read(*log, a2).prev_in_request, a1);
  EXPECT_EQ(Read(*log, a2).prev_in_session, b1);
  EXPECT_EQ(Read(*log, c1).prev_in_session, 0u);
  EXPECT_TRUE(VerifyLog(log->store()).ok()) << VerifyLog(log->store()).Summary();
}

TEST(Links, TwoOrgsUsingOneSessionIdHaveTwoChains) {
  TempDir dir;
  auto log = OpenLog(dir.path());
  const uint64_t o1 = Append(*log, MakeEvent(ev::kRequestReceived, "r1", "shared", "a1", "o1"));
  const uint64_t o2 = Append(*log, MakeEvent(ev::kRequestReceived, "r1", "shared", "a1", "o2"));
  const uint64_t o1b = Append(*log, MakeEvent(ev::kDecisionMade, "r1", "shared", "a1", "o1"));
  EXPECT_EQ(Read(*log, o2).prev_in_session, 0u);
  EXPECT_EQ(Read(*log, o2).prev_in_request, 0u);
  EXPECT_EQ(Read(*log, o1b).prev_in_session, o1);
  EXPECT_EQ(Read(*log, o1b).prev_in_request, o1);
}

TEST(Links, AReopenedLogFindsThePreviousEventThroughItsIndex) {
  TempDir dir;
  uint64_t first = 0, other_org = 0;
  {
    auto log = OpenLog(dir.path());
    first = Append(*log, MakeEvent(ev::kRequestReceived, "r1", "s1", "a1", "o1"));
    other_org = Append(*log, MakeEvent(ev::kRequestReceived, "r1", "s1", "a1", "o2"));
    for (int i = 0; i < 5; ++i) Append(*log, MakeEvent(ev::kRequestReceived, "x" + std::to_string(i), "s9"));
  }
  auto log = OpenLog(dir.path());  // nothing remembered: the index walk skips o2's event
  const uint64_t next = Append(*log, MakeEvent(ev::kDecisionMade, "r1", "s1", "a1", "o1"));
  EXPECT_EQ(Read(*log, next).prev_in_request, first);
  EXPECT_EQ(Read(*log, next).prev_in_session, first);
  const uint64_t next2 = Append(*log, MakeEvent(ev::kDecisionMade, "r1", "s1", "a1", "o2"));
  EXPECT_EQ(Read(*log, next2).prev_in_request, other_org);
  EXPECT_TRUE(VerifyLog(log->store()).ok()) << VerifyLog(log->store()).Summary();
}

TEST(Links, EventsOfOneGroupLinkToEachOtherBeforeTheyAreWritten) {
  TempDir dir;
  auto log = OpenLog(dir.path());
  std::vector<Event> group = {MakeEvent(ev::kRequestReceived, "g1"), MakeEvent(ev::kDecisionMade, "g1"),
                              MakeEvent(ev::kExecutionStarted, "g1")};
  std::vector<uint64_t> seqs;
  for (auto& f : log->AppendGroupAsync(group)) {
    AppendResult r = f.get();
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    seqs.push_back(r.seq);
  }
  EXPECT_EQ(Read(*log, seqs[1]).prev_in_request, seqs[0]);
  EXPECT_EQ(Read(*log, seqs[2]).prev_in_request, seqs[1]);
  EXPECT_EQ(Read(*log, seqs[2]).prev_in_session, seqs[1]);
}

TEST(Links, AnAppendCannotChooseItsOwnLinks) {
  TempDir dir;
  auto log = OpenLog(dir.path());
  Append(*log, MakeEvent(ev::kRequestReceived, "r1"));
  Event forged = MakeEvent(ev::kDecisionMade, "r1");
  forged.prev_in_request = 0;  // "I am the request's first event"
  const uint64_t seq = Append(*log, forged);
  EXPECT_EQ(Read(*log, seq).prev_in_request, 1u);
}

TEST(Links, ABodyWithLinksReadsBackAsWritten) {
  Event e = MakeEvent(ev::kDecisionMade, "r1");
  e.seq = 9;
  e.prev_in_request = 3;
  e.prev_in_session = 0;
  std::string body;
  ASSERT_TRUE(EncodeEventBody(e, kDefaultMaxEventBytes, &body).ok());
  EXPECT_NE(body.find(R"("seq":9,"seq_prev_request":3,"seq_prev_session":0,"session_id")"), std::string::npos)
      << body;
  EnvelopeView v;
  ASSERT_TRUE(ScanEnvelope(body, &v)) << body;
  EXPECT_EQ(v.prev_in_request, 3u);
  EXPECT_EQ(v.prev_in_session, 0u);
  Event back;
  ASSERT_TRUE(EventFromText(body, &back).ok());
  EXPECT_EQ(back.prev_in_request, 3u);
  std::string again;
  ASSERT_TRUE(EncodeEventBody(back, kDefaultMaxEventBytes, &again).ok());
  EXPECT_EQ(again, body);
  // A link must name an earlier event, and only of an id the event has.
  e.prev_in_request = 9;
  EXPECT_FALSE(ValidateEnvelope(e).ok());
  e.prev_in_request = 3;
  e.session_id.clear();
  EXPECT_FALSE(ValidateEnvelope(e).ok());
}

// The records of request r1 and session s1 as an answer would carry them.
std::vector<std::string> Records(EventLog& log, const std::string& session) {
  std::vector<std::string> out;
  for (uint64_t seq = 1; seq <= log.head_seq(); ++seq) {
    Event e = Read(log, seq);
    if (e.session_id == session) out.push_back(e.RecordJson().dump());
  }
  return out;
}

std::string Lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

const ProofCheck* CheckNamed(const ProofReport& r, const std::string& what) {
  for (const auto& c : r.checks)
    if (c.what == what) return &c;
  return nullptr;
}

TEST(Links, VerifyProofCompleteNamesTheEventLeftOutOfAnAnswer) {
  TempDir dir;
  auto log = OpenLog(dir.path());
  for (const char* type :
       {ev::kRequestReceived, ev::kDecisionMade, ev::kExecutionStarted, ev::kExecutionCompleted}) {
    Append(*log, MakeEvent(type, "r1", "s1"));
    Append(*log, MakeEvent(type, "r2", "s2"));
  }
  Append(*log, MakeEvent(ev::kRequestReceived, "r3", "s1"));
  std::vector<std::string> answer = Records(*log, "s1");
  ASSERT_EQ(answer.size(), 5u);

  ProofBundle b;
  NoteSigner signer;
  ASSERT_TRUE(CheckpointSigner(std::string(32, 'k'), "", &signer).ok());
  b.key = signer.VerifierKey();
  b.complete = true;
  b.records = {{"answer", Lines(answer)}};
  // Every check of the whole answer's chains passes; without proofs the
  // report as a whole still fails, which is not what this test is about.
  auto whole = VerifyProofBundle(b);
  const ProofCheck* req = CheckNamed(whole, "request o1/r1");
  const ProofCheck* ses = CheckNamed(whole, "session o1/s1");
  ASSERT_NE(req, nullptr) << whole.Text();
  ASSERT_NE(ses, nullptr) << whole.Text();
  EXPECT_TRUE(req->status.ok()) << whole.Text();
  EXPECT_NE(req->detail.find("ended by execution.completed: complete"), std::string::npos) << req->detail;
  EXPECT_TRUE(ses->status.ok()) << whole.Text();
  EXPECT_NE(ses->detail.find("complete up to seq 9"), std::string::npos) << ses->detail;

  answer.erase(answer.begin() + 2);  // r1's execution.started
  b.records = {{"answer", Lines(answer)}};
  auto cut = VerifyProofBundle(b);
  req = CheckNamed(cut, "request o1/r1");
  ses = CheckNamed(cut, "session o1/s1");
  ASSERT_NE(req, nullptr) << cut.Text();
  EXPECT_FALSE(req->status.ok());
  EXPECT_NE(req->status.message().find("an event is missing"), std::string::npos) << req->status.ToString();
  ASSERT_NE(ses, nullptr) << cut.Text();
  EXPECT_FALSE(ses->status.ok());
  EXPECT_FALSE(cut.ok());
}

}  // namespace
}  // namespace tollgate
