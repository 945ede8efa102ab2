// Witness cosignatures of the checkpoints (issue 32; docs/log_format.md,
// "Witnesses"), through the real binary and two independent witnesses
// (tests/audit/tlog_witness.py: Python and `cryptography`, written from the
// C2SP tlog-witness and tlog-cosignature specs, sharing no code with
// tollgate):
//   - `up --witness ... --witness-quorum 2` serves a checkpoint cosigned by
//     both, which `audit verify-proof` accepts with a quorum of 2 and
//     refuses with a quorum of 3 or without the cosignatures;
//   - two different histories shown to two auditors: the log rewritten and
//     served with the same key is refused by the witness that cosigned the
//     original (its consistency proof fails), and a consistency proof
//     between the two auditors' checkpoints fails;
//   - the client alone (audit/witness_client.h) over an in-memory tree:
//     after a restart it learns the witness's size from a 409 and goes on;
//     a fork gets a 422 and no cosignature.
// Only loopback addresses are used.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "audit/witness_client.h"
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

// The tree size a signed note names (its second line).
uint64_t SizeOf(const std::string& note) {
  const size_t a = note.find('\n');
  return std::stoull(note.substr(a + 1, note.find('\n', a + 1) - a - 1));
}

struct Witness {
  std::unique_ptr<ChildProcess> process = std::make_unique<ChildProcess>();
  std::string url;
  std::string vkey;
  std::string name;
};

class WitnessTest : public ::testing::Test {
 protected:
  // `up` on `data` with `more` flags, its banner printed.
  void StartUp(const std::string& data, std::vector<std::string> more = {}) {
    std::vector<std::string> args{
        TOLLGATE_BIN, "up", "--data", data, "--durability", "buffered", "--checkpoint-every-seconds", "0"};
    args.insert(args.end(), more.begin(), more.end());
    up_ = std::make_unique<ChildProcess>();
    const std::string name = dir_.sub("up" + std::to_string(++commands_));
    ASSERT_TRUE(up_->Start(args, name + ".out", name + ".err"));
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
    ASSERT_EQ(Run({"submit", "--data", data_, "--agent", "auditee", "--session", "s-witness", "--tool",
                   "echo", "--args", R"({"text":"hi"})", "--request-id", rid, "--wait", "--timeout", "60"},
                  &out),
              0)
        << out;
  }
  // GET `path` from the running `up` with its admin token (200 expected).
  std::string Get(const std::string& path) {
    Json ep;
    EXPECT_TRUE(ReadEndpoints(data_, &ep).ok());
    httplib::Client c(ep.value("http", ""));
    c.set_read_timeout(30);
    std::string token = ReadFile(data_ + "/admin.token");
    while (!token.empty() && token.back() == '\n') token.pop_back();
    c.set_bearer_token_auth(token);
    auto r = c.Get(path);
    EXPECT_TRUE(r && r->status == 200) << path << ": " << (r ? r->body : "no answer");
    return r ? r->body : "";
  }
  // A witness pinned to the log key `log_vkey`, listening on loopback.
  void StartWitness(const std::string& name, const std::string& log_vkey, Witness* w) {
    w->name = name;
    const std::string base = dir_.sub("witness-" + std::to_string(++commands_));
    ASSERT_TRUE(w->process->Start({"/usr/bin/python3", TOLLGATE_SOURCE_DIR "/tests/audit/tlog_witness.py",
                                   "--log-vkey", log_vkey, "--name", name, "--state", base + ".state"},
                                  base + ".out", base + ".err"));
    ASSERT_TRUE(WaitUntil([&] { return w->process->Poll() || Contains(w->process->out(), "\n"); }, 30s))
        << w->process->err();
    Json info;
    ASSERT_TRUE(ParseJson(w->process->out(), &info).ok()) << w->process->out() << w->process->err();
    w->url = "http://127.0.0.1:" + std::to_string(info.value("port", 0));
    w->vkey = info.value("vkey", "");
  }
  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = dir_.sub(name);
    std::ofstream(path) << text;
    return path;
  }
  // The log's checkpoint verifier key: `up` once, without witnesses (the
  // witnesses pin it before the `up` that asks them starts).
  std::string LogKey(const std::string& data) {
    StartUp(data);
    Json key;
    EXPECT_TRUE(ParseJson(Get("/v1/audit/checkpoint-key"), &key).ok());
    StopUp();
    return key.value("verifier_key", "");
  }

  testing::TempDir dir_;
  std::string data_;
  std::unique_ptr<ChildProcess> up_;
  int commands_ = 0;
};

// The witnesses' transport in the test: cpp-httplib (the product's is
// libcurl, deploy/checkpoints.cpp).
Status HttpPost(const std::string& url, const std::string& body, WitnessReply* reply) {
  const size_t path = url.find('/', url.find("//") + 2);
  httplib::Client c(url.substr(0, path));
  c.set_read_timeout(30);
  auto r = c.Post(url.substr(path), body, "text/plain");
  if (!r) return Status::Error("E_UNAVAILABLE", "the witness did not answer");
  reply->status = r->status;
  reply->content_type = r->get_header_value("Content-Type");
  reply->body = r->body;
  return Status::Ok();
}

std::string SignedAt(const NoteSigner& log, const merkle::MemoryTree& tree, uint64_t size) {
  Checkpoint cp;
  cp.origin = log.name();
  cp.size = size;
  EXPECT_TRUE(merkle::RootAt(tree, size, &cp.root).ok());
  return SignCheckpoint(cp, log);
}

TEST_F(WitnessTest, TheClientLearnsAWitnessSizeFromA409AfterARestartAndAForkGetsA422) {
  NoteSigner log;
  ASSERT_TRUE(NoteSigner::FromSeed("tollgate/witness-test", std::string(32, 'k'), &log).ok());
  merkle::MemoryTree tree, fork;
  for (int i = 0; i < 20; ++i) {
    tree.AppendData(std::string(1, static_cast<char>(i)));
    fork.AppendData(std::string(1, static_cast<char>(i < 5 ? i : 100 + i)));
  }
  Witness w;
  StartWitness("witness.test/w1", log.VerifierKey(), &w);
  WitnessOptions options;
  options.witnesses.resize(1);
  ASSERT_TRUE(ParseWitnessFlag(w.url + "=" + w.vkey, &options.witnesses[0]).ok());
  options.post = HttpPost;
  std::mutex mu;
  std::map<uint64_t, std::string> stored;
  auto store = [&](uint64_t size, const std::string& note) {
    std::lock_guard<std::mutex> lock(mu);
    stored[size] = note;
    return Status::Ok();
  };
  auto cosigned = [&](uint64_t size) {
    std::lock_guard<std::mutex> lock(mu);
    SignedNote n;
    return stored.count(size) && ParseNote(stored[size], &n).ok() &&
           VerifyCosignatures(n, {options.witnesses[0].key}, 1).ok();
  };

  std::unique_ptr<Witnesses> first;
  ASSERT_TRUE(Witnesses::Start(tree, store, options, &first).ok());
  first->Offer(7, SignedAt(log, tree, 7));
  ASSERT_TRUE(WaitUntil([&] { return cosigned(7); }, 30s)) << first->last_error().ToString();
  first.reset();

  // A new client believes the witness is at 0; the witness says 7.
  std::unique_ptr<Witnesses> restarted;
  ASSERT_TRUE(Witnesses::Start(tree, store, options, &restarted).ok());
  restarted->Offer(12, SignedAt(log, tree, 12));
  ASSERT_TRUE(WaitUntil([&] { return cosigned(12); }, 30s)) << restarted->last_error().ToString();
  EXPECT_TRUE(Contains(w.process->err(), "\" 409 ")) << w.process->err();
  EXPECT_TRUE(restarted->last_error().ok()) << restarted->last_error().ToString();
  restarted.reset();

  // Another history of 20 leaves sharing the first 5: not an extension of 12.
  std::unique_ptr<Witnesses> forked;
  ASSERT_TRUE(Witnesses::Start(fork, store, options, &forked).ok());
  forked->Offer(20, SignedAt(log, fork, 20));
  ASSERT_TRUE(WaitUntil([&] { return !forked->last_error().ok(); }, 30s));
  EXPECT_TRUE(Contains(forked->last_error().message(), "HTTP 422")) << forked->last_error().ToString();
  EXPECT_FALSE(cosigned(20));
  EXPECT_EQ(forked->cosigned_size(), 0u);
}

TEST_F(WitnessTest, TwoWitnessesCosignTheServedCheckpointAndVerifyProofCountsThem) {
  const std::string key = LogKey(dir_.sub("data"));
  Witness w1, w2;
  StartWitness("witness.test/w1", key, &w1);
  StartWitness("witness.test/w2", key, &w2);
  StartUp(dir_.sub("data"), {"--witness", w1.url + "=" + w1.vkey, "--witness", w2.url + "=" + w2.vkey,
                             "--witness-quorum", "2"});
  for (int i = 0; i < 3; ++i) Submit("r-" + std::to_string(i));
  const uint64_t signed_size = SizeOf(Get("/v1/audit/checkpoint?fresh=1"));
  std::string cosigned;
  ASSERT_TRUE(WaitUntil(
      [&] {
        cosigned = Get("/v1/audit/checkpoint");
        return SizeOf(cosigned) >= signed_size && Contains(cosigned, "— " + w1.name + " ") &&
               Contains(cosigned, "— " + w2.name + " ");
      },
      60s))
      << cosigned << up_->err();
  const std::string cp = WriteFile("cosigned.txt", cosigned);

  std::string out;
  EXPECT_EQ(Run({"audit", "verify-proof", "--key", key, "--checkpoint", cp, "--witness", w1.vkey, "--witness",
                 w2.vkey, "--quorum", "2"},
                &out),
            0)
      << out;
  EXPECT_TRUE(Contains(out, "2 of 2 cosigned")) << out;
  EXPECT_EQ(Run({"audit", "verify-proof", "--key", key, "--checkpoint", cp, "--witness", w1.vkey, "--witness",
                 w2.vkey, "--quorum", "3"},
                &out),
            1)
      << out;
  // The log's own signature alone (the cosignature lines cut) meets no quorum.
  const std::string plain = WriteFile("plain.txt", cosigned.substr(0, cosigned.find("— " + w1.name + " ")));
  EXPECT_EQ(Run({"audit", "verify-proof", "--key", key, "--checkpoint", plain, "--witness", w1.vkey,
                 "--quorum", "1"},
                &out),
            1)
      << out;
  EXPECT_TRUE(Contains(out, "FAIL witnesses")) << out;
  StopUp();
}

TEST_F(WitnessTest, TwoHistoriesShownToTwoAuditorsAreCaughtByTheWitnessAndByConsistency) {
  const std::string key = LogKey(dir_.sub("data"));
  Witness w1;
  StartWitness("witness.test/w1", key, &w1);
  const std::string with_w1 = w1.url + "=" + w1.vkey;
  StartUp(dir_.sub("data"), {"--witness", with_w1});
  for (int i = 0; i < 3; ++i) Submit("r-" + std::to_string(i));
  const uint64_t signed_size = SizeOf(Get("/v1/audit/checkpoint?fresh=1"));
  std::string first;  // auditor A's checkpoint, cosigned by w1
  ASSERT_TRUE(WaitUntil(
      [&] {
        first = Get("/v1/audit/checkpoint");
        return SizeOf(first) >= signed_size && Contains(first, "— " + w1.name + " ");
      },
      60s))
      << first << up_->err();
  StopUp();

  // The attacker holds the data directory (the log and the keys): one
  // early record changed, every hash after it recomputed, loaded into a
  // fresh log served with the same key and the same witness.
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
  StartUp(dir_.sub("forged"), {"--witness", with_w1});
  Submit("r-after");
  const std::string second = Get("/v1/audit/checkpoint?fresh=1");  // auditor B's
  ASSERT_GT(SizeOf(second), SizeOf(first));

  // The witness that cosigned A's checkpoint refuses B's: the proof from
  // A's size does not verify (422 Unprocessable Entity).
  EXPECT_TRUE(WaitUntil([&] { return Contains(w1.process->err(), "\" 422 "); }, 60s)) << w1.process->err();
  EXPECT_FALSE(Contains(Get("/v1/audit/checkpoint"), "— " + w1.name + " "));
  EXPECT_EQ(Run({"audit", "verify-proof", "--key", key, "--checkpoint", WriteFile("b.txt", second),
                 "--witness", w1.vkey},
                &out),
            1)
      << out;

  // The two auditors compare: both checkpoints are signed by the log's key,
  // but no consistency proof joins them.
  const std::string proof = Get("/v1/audit/consistency?from=" + std::to_string(SizeOf(first)) +
                                "&to=" + std::to_string(SizeOf(second)));
  EXPECT_EQ(Run({"audit", "verify-proof", "--key", key, "--checkpoint", WriteFile("a.txt", first),
                 "--checkpoint", dir_.sub("b.txt"), "--consistency", WriteFile("c.txt", proof)},
                &out),
            1)
      << out;
  EXPECT_TRUE(Contains(out, "OK checkpoint")) << "both are signed by the key: " << out;
  EXPECT_TRUE(Contains(out, "FAIL consistency")) << out;
  StopUp();
}

}  // namespace
}  // namespace tollgate
