// Signed checkpoints and proofs (issue 32), through the real binary and an
// independent verifier (tests/audit/tlog_verify.py: Python and
// `cryptography`, written from RFC 9162 and the C2SP specs, sharing no code
// with tollgate):
//   - the checkpoints `up` serves are signed by the key it publishes, and
//     the inclusion proofs of the events it exports and the consistency
//     proof between two checkpoints check out;
//   - a record changed in what the verifier is shown fails its proof;
//   - a log rewritten and rehashed after a checkpoint was published
//     verifies as a chain, but fails the consistency proof from that
//     checkpoint;
//   - a session's answer with its proofs passes `verify-proof --complete`,
//     and the same answer with one event left out fails it.
// Only loopback addresses are used.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/canonical_json.h"
#include "deploy/endpoints.h"
#include "test_util.h"
#include "tests/child_process.h"

namespace tollgate {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::WaitUntil;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class CheckpointTest : public ::testing::Test {
 protected:
  // `up` on `data`, its banner printed.
  void StartUp(const std::string& data) {
    up_ = std::make_unique<ChildProcess>();
    ASSERT_TRUE(up_->Start({TOLLGATE_BIN, "up", "--data", data, "--durability", "buffered"},
                           dir_.sub("up.out"), dir_.sub("up.err")));
    ASSERT_TRUE(WaitUntil([&] { return up_->Poll() || Contains(up_->out(), "Ctrl-C stops"); }, 60s) &&
                !up_->Poll())
        << up_->out() << up_->err();
    data_ = data;
  }
  void StopUp() {
    Json ep;
    ASSERT_TRUE(ReadEndpoints(data_, &ep).ok());
    ASSERT_EQ(kill(ep.value("pid", 0), SIGTERM), 0);
    ASSERT_TRUE(up_->Wait(30s).has_value());
  }
  // A `tollgate` command run to its end: its exit code, its output in *out.
  int Run(std::vector<std::string> args, std::string* out) {
    args.insert(args.begin(), TOLLGATE_BIN);
    ChildProcess c;
    const std::string name = dir_.sub("cmd" + std::to_string(++commands_));
    if (!c.Start(args, name + ".out", name + ".err")) return -1;
    auto code = c.Wait(60s);
    *out = c.out() + c.err();
    return code.value_or(-1);
  }
  void Submit(const std::string& rid) {
    std::string out;
    ASSERT_EQ(Run({"submit", "--data", data_, "--agent", "auditee", "--session", "s-proofs", "--tool", "echo",
                   "--args", R"({"text":"hi"})", "--request-id", rid, "--wait", "--timeout", "60"},
                  &out),
              0)
        << out;
  }
  // GET `path` from the running `up` with its admin token: the body, and
  // the status in *status.
  std::string Get(const std::string& path, int* status = nullptr) {
    Json ep;
    EXPECT_TRUE(ReadEndpoints(data_, &ep).ok());
    httplib::Client c(ep.value("http", ""));
    c.set_read_timeout(30);
    std::string token = ReadFile(data_ + "/admin.token");
    while (!token.empty() && token.back() == '\n') token.pop_back();
    c.set_bearer_token_auth(token);
    auto r = c.Get(path);
    if (status != nullptr) *status = r ? r->status : 0;
    EXPECT_TRUE(r && r->status == 200) << path << ": " << (r ? r->body : "no answer");
    return r ? r->body : "";
  }
  // The tree size a signed note names (its second line).
  static uint64_t SizeOf(const std::string& note) {
    const size_t a = note.find('\n');
    return std::stoull(note.substr(a + 1, note.find('\n', a + 1) - a - 1));
  }
  // Runs the independent verifier over `bundle`: its exit code, output in *out.
  int Verify(const Json& bundle, std::string* out) {
    const std::string path = dir_.sub("bundle" + std::to_string(++commands_) + ".json");
    std::ofstream(path) << bundle.dump();
    ChildProcess c;
    EXPECT_TRUE(c.Start({"/usr/bin/python3", TOLLGATE_SOURCE_DIR "/tests/audit/tlog_verify.py", path},
                        path + ".out", path + ".err"));
    auto code = c.Wait(60s);
    *out = c.out() + c.err();
    return code.value_or(-1);
  }
  // The export records of the session, one JSON object each.
  std::vector<Json> SessionRecords() {
    std::vector<Json> records;
    std::istringstream in(Get("/v1/audit/export?session=s-proofs"));
    for (std::string line; std::getline(in, line);) {
      Json j;
      if (ParseJson(line, &j).ok() && j.is_object() && j.contains("seq") && j.contains("hash"))
        records.push_back(j);
    }
    return records;
  }

  testing::TempDir dir_;
  std::string data_;
  std::unique_ptr<ChildProcess> up_;
  int commands_ = 0;
};

TEST_F(CheckpointTest, AnIndependentVerifierChecksTheServedCheckpointsAndProofs) {
  StartUp(dir_.sub("data"));
  for (int i = 0; i < 3; ++i) Submit("r-first-" + std::to_string(i));
  const std::string first = Get("/v1/audit/checkpoint?fresh=1");
  for (int i = 0; i < 2; ++i) Submit("r-later-" + std::to_string(i));
  const std::string second = Get("/v1/audit/checkpoint?fresh=1");
  ASSERT_LT(SizeOf(first), SizeOf(second));
  Json key;
  ASSERT_TRUE(ParseJson(Get("/v1/audit/checkpoint-key"), &key).ok());

  Json bundle{{"vkey", key.value("verifier_key", "")},
              {"checkpoints", {first, second}},
              {"inclusions", Json::array()},
              {"consistency", Json::array()}};
  const std::vector<Json> records = SessionRecords();
  ASSERT_GE(records.size(), 5u * 3);  // received, decided, completed (at least) per call
  for (const Json& r : records) {
    const uint64_t seq = r["seq"];
    if (seq > SizeOf(second)) continue;
    bundle["inclusions"].push_back({{"record", r},
                                    {"proof", Get("/v1/audit/proof?seq=" + std::to_string(seq) +
                                                  "&size=" + std::to_string(SizeOf(second)))}});
  }
  bundle["consistency"].push_back(
      {{"old", first},
       {"new", second},
       {"proof", Get("/v1/audit/consistency?from=" + std::to_string(SizeOf(first)) +
                     "&to=" + std::to_string(SizeOf(second)))}});
  std::string out;
  EXPECT_EQ(Verify(bundle, &out), 0) << out;
  EXPECT_FALSE(Contains(out, "FAIL")) << out;
  EXPECT_TRUE(Contains(out, "is a prefix of size " + std::to_string(SizeOf(second)))) << out;

  // What the verifier is shown, changed: a record's content, a checkpoint's
  // size, another key.
  Json changed = bundle;
  changed["inclusions"][0]["record"]["data"]["tampered"] = true;
  EXPECT_EQ(Verify(changed, &out), 1) << out;
  EXPECT_TRUE(Contains(out, "FAIL seq")) << out;
  changed = bundle;
  std::string forged = second;
  forged.replace(forged.find('\n') + 1, std::to_string(SizeOf(second)).size(),
                 std::to_string(SizeOf(second) + 1));
  changed["checkpoints"] = {forged};
  EXPECT_EQ(Verify(changed, &out), 1) << out;
  EXPECT_TRUE(Contains(out, "FAIL checkpoint signature")) << out;
  StopUp();
}

TEST_F(CheckpointTest, ASessionAnswerWithOneEventLeftOutFailsTheCompletenessCheck) {
  StartUp(dir_.sub("data"));
  for (int i = 0; i < 3; ++i) Submit("r-" + std::to_string(i));
  const std::string cp = Get("/v1/audit/checkpoint?fresh=1");
  Json key, answer;
  ASSERT_TRUE(ParseJson(Get("/v1/audit/checkpoint-key"), &key).ok());
  ASSERT_TRUE(ParseJson(Get("/v1/audit?session=s-proofs&proofs=1&limit=1000"), &answer).ok());
  StopUp();
  ASSERT_EQ(answer.value("checkpoint", ""), cp);
  std::vector<std::string> lines;
  for (const Json& r : answer["events"]) {
    ASSERT_TRUE(r.contains("proof")) << r.dump();  // every event is under the checkpoint
    lines.push_back(r.dump());
  }
  ASSERT_GE(lines.size(), 9u);
  auto verify = [&](const std::vector<std::string>& records, std::string* out) {
    std::ofstream(dir_.sub("cp.txt")) << cp;
    std::ofstream recs(dir_.sub("answer.jsonl"), std::ios::trunc);
    for (const auto& l : records) recs << l << "\n";
    recs.close();
    return Run({"audit", "verify-proof", "--key", key.value("verifier_key", ""), "--checkpoint",
                dir_.sub("cp.txt"), "--record", dir_.sub("answer.jsonl"), "--complete"},
               out);
  };
  std::string out;
  EXPECT_EQ(verify(lines, &out), 0) << out;
  EXPECT_TRUE(Contains(out, "OK session ")) << out;
  EXPECT_TRUE(Contains(out, "ended by execution.completed: complete")) << out;

  // The middle call's decision left out: every record left still verifies,
  // but its request's and its session's chains name the missing one.
  std::vector<std::string> cut;
  for (const auto& l : lines) {
    Json r;
    ASSERT_TRUE(ParseJson(l, &r).ok());
    if (r.value("request_id", "") == "r-1" && r.value("type", "") == "decision.made") continue;
    cut.push_back(l);
  }
  ASSERT_EQ(cut.size() + 1, lines.size());
  EXPECT_EQ(verify(cut, &out), 1) << out;
  EXPECT_TRUE(Contains(out, "FAIL request ")) << out;
  EXPECT_TRUE(Contains(out, "FAIL session ")) << out;
  EXPECT_TRUE(Contains(out, "an event is missing")) << out;

  // The CLI's get_audit_log, read from the log itself with up stopped,
  // gives the same answer with proofs: each names its checkpoint.
  ASSERT_EQ(Run({"audit", "query", "--data", data_, "--session", "s-proofs", "--all", "--proofs"}, &out), 0)
      << out;
  std::ofstream(dir_.sub("cli.jsonl")) << out;
  ASSERT_EQ(Run({"audit", "verify-proof", "--key", key.value("verifier_key", ""), "--record",
                 dir_.sub("cli.jsonl"), "--complete"},
                &out),
            0)
      << out;
  EXPECT_TRUE(Contains(out, "OK session ")) << out;
}

TEST_F(CheckpointTest, ALogRewrittenAfterACheckpointFailsTheConsistencyProofFromIt) {
  StartUp(dir_.sub("data"));
  for (int i = 0; i < 3; ++i) Submit("r-" + std::to_string(i));
  const std::string published = Get("/v1/audit/checkpoint?fresh=1");
  Json key;
  ASSERT_TRUE(ParseJson(Get("/v1/audit/checkpoint-key"), &key).ok());
  StopUp();

  // The attacker holds the data directory (the log and the keys): one
  // early record changed, every hash after it recomputed, loaded into a
  // fresh log. The chain alone cannot tell.
  std::string out;
  ASSERT_EQ(Run({"audit", "export", "--data", dir_.sub("data"), "--out", dir_.sub("log.jsonl")}, &out), 0)
      << out;
  ChildProcess rewrite;
  ASSERT_TRUE(rewrite.Start({"/usr/bin/python3", TOLLGATE_SOURCE_DIR "/tests/audit/rewrite_log.py",
                             dir_.sub("log.jsonl"), dir_.sub("rewritten.jsonl"), "first:execution.completed"},
                            dir_.sub("rw.out"), dir_.sub("rw.err")));
  ASSERT_EQ(rewrite.Wait(60s).value_or(-1), 0) << rewrite.err();
  std::filesystem::create_directories(dir_.sub("forged"));
  std::filesystem::copy(dir_.sub("data/keys"), dir_.sub("forged/keys"),
                        std::filesystem::copy_options::recursive);
  std::filesystem::copy(dir_.sub("data/admin.token"), dir_.sub("forged/admin.token"));
  if (std::filesystem::exists(dir_.sub("data/tokens.json")))
    std::filesystem::copy(dir_.sub("data/tokens.json"), dir_.sub("forged/tokens.json"));
  ASSERT_EQ(
      Run({"audit", "import", "--data", dir_.sub("forged/log"), "--file", dir_.sub("rewritten.jsonl")}, &out),
      0)
      << out;
  ASSERT_EQ(Run({"audit", "verify", "--data", dir_.sub("forged")}, &out), 0) << "the chain verifies: " << out;

  // The rewritten log, served with the same key: its new checkpoint is
  // signed as well as the old one, but not consistent with it.
  StartUp(dir_.sub("forged"));
  Submit("r-after");
  const std::string now = Get("/v1/audit/checkpoint?fresh=1");
  Json bundle{{"vkey", key.value("verifier_key", "")},
              {"checkpoints", {published, now}},
              {"consistency",
               {{{"old", published},
                 {"new", now},
                 {"proof", Get("/v1/audit/consistency?from=" + std::to_string(SizeOf(published)) +
                               "&to=" + std::to_string(SizeOf(now)))}}}}};
  EXPECT_EQ(Verify(bundle, &out), 1) << out;
  EXPECT_TRUE(Contains(out, "OK   checkpoint")) << "both are signed by the key: " << out;
  EXPECT_TRUE(Contains(out, "FAIL size " + std::to_string(SizeOf(published)) + " is a prefix")) << out;
  StopUp();
}

}  // namespace
}  // namespace tollgate
