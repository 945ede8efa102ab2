// get_audit_log with proofs: true (issue 32, "Proofs on every audit
// answer"): the agent's own entries, each with its C2SP tlog-proof against
// the latest signed checkpoint, exactly as GET /v1/audit?proofs=1 gives
// them (audit/audit_proofs.h), and the proofs verify offline with the
// verify-proof library. Another org's events never come back, and a reader
// without a tree says so instead of answering without proofs. Exports with
// proofs (`tollgate audit export --proofs`) verify both ways.
#include <gtest/gtest.h>

#include <sstream>

#include "audit/audit_proofs.h"
#include "audit/checkpointer.h"
#include "audit/event_log.h"
#include "audit/export.h"
#include "audit/log_audit_reader.h"
#include "audit/log_sink.h"
#include "audit/merkle_store.h"
#include "audit/verify.h"
#include "audit/verify_proof.h"
#include "core/tlog_proof.h"
#include "tests/execute_test_util.h"

namespace tollgate {
namespace {

class AuditProofsToolTest : public ::testing::Test, public testing::ToolFixture {
 protected:
  void SetUp() override {
    ASSERT_TRUE(EventLog::Open(dir().sub("log"), LogOptions{}, &log_).ok());
    sink_ = std::make_unique<LogSink>(*log_);
  }
  void Append(const std::string& request, const std::string& org) {
    std::vector<EventSink::Appended> out;
    sink_->AppendAll({testing::MakeEvent("request.received", request, "s1", "a1", org)}, &out);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_TRUE(out[0].status.ok()) << out[0].status.ToString();
  }
  // The tree caught up with the log and a checkpoint of it signed; its note.
  std::string SignCheckpoint() {
    NoteSigner signer;
    EXPECT_TRUE(CheckpointSigner(std::string(32, 's'), "", &signer).ok());
    EXPECT_TRUE(MerkleStore::Open(log_->store(), &tree_).ok());
    CheckpointOptions o;
    o.every_events = 0;
    o.every = std::chrono::milliseconds(0);
    o.log_them = false;
    EXPECT_TRUE(Checkpointer::Start(*tree_, log_->head_seq(), signer, o, nullptr, &cp_).ok());
    std::string note;
    EXPECT_TRUE(cp_->SignNow(&note).ok());
    return note;
  }

  std::unique_ptr<EventLog> log_;
  std::unique_ptr<LogSink> sink_;
  std::unique_ptr<MerkleStore> tree_;
  std::unique_ptr<Checkpointer> cp_;
};

TEST_F(AuditProofsToolTest, EachOwnEntryComesWithAProofThatVerifiesOfflineAgainstTheCheckpointGiven) {
  Append("r1", "o1");
  Append("r2", "o2");
  Append("r3", "o1");
  Append("r4", "o2");
  const std::string note = SignCheckpoint();
  Append("r5", "o1");  // after the checkpoint: not covered yet
  LogAuditReader reader(log_->store(), tree_.get());
  audit_ = &reader;

  Json r = Call("get_audit_log", {{"scope", "agent"}, {"proofs", true}});
  ASSERT_TRUE(r["success"]) << r.dump();
  const Json& data = r["data"];
  EXPECT_EQ(data["checkpoint"], note);
  ASSERT_EQ(data["events"].size(), 3u) << "the caller's org only: " << data.dump();
  EXPECT_FALSE(data.contains("entries")) << "the seed's copy is left out with proofs";
  std::string records;
  for (const Json& e : data["events"]) {
    EXPECT_EQ(e["org_id"], "o1");
    if (e["request_id"] == "r5") {
      EXPECT_EQ(e.value("proof_pending", false), true) << e.dump();
      EXPECT_FALSE(e.contains("proof"));
      continue;
    }
    ASSERT_TRUE(e.contains("proof") && e["proof"].is_string()) << e.dump();
    TlogProof p;
    ASSERT_TRUE(ParseTlogProof(e["proof"].get<std::string>(), &p).ok());
    EXPECT_EQ(p.index + 1, e["seq"].get<uint64_t>());
    EXPECT_EQ(p.checkpoint, note);
    // Byte for byte what GET /v1/audit?proofs=1 serves for it.
    std::string served;
    ASSERT_TRUE(TlogProofText(*tree_, note, 4, e["seq"].get<uint64_t>(), &served).ok());
    EXPECT_EQ(e["proof"], served);
    records += e.dump() + "\n";
  }

  ProofBundle bundle;
  bundle.key = cp_->verifier_key();
  bundle.checkpoints.push_back({"checkpoint", data["checkpoint"].get<std::string>()});
  bundle.records.push_back({"answer", records});
  const ProofReport report = VerifyProofBundle(bundle);
  EXPECT_TRUE(report.ok()) << report.Text();

  // A record altered after the answer no longer verifies.
  Json forged = data["events"][0];
  forged["tool"] = "http_request";
  bundle.records = {{"forged", forged.dump() + "\n"}};
  EXPECT_FALSE(VerifyProofBundle(bundle).ok());
}

TEST_F(AuditProofsToolTest, WithoutProofsTheAnswerIsAsBefore) {
  Append("r1", "o1");
  SignCheckpoint();
  LogAuditReader reader(log_->store(), tree_.get());
  audit_ = &reader;
  Json r = Call("get_audit_log", {{"scope", "agent"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_FALSE(r["data"].contains("checkpoint"));
  ASSERT_EQ(r["data"]["events"].size(), 1u);
  EXPECT_FALSE(r["data"]["events"][0].contains("proof"));
  EXPECT_EQ(Code(Call("get_audit_log", {{"proofs", "yes"}})), "E_INVALID_ARGS");
}

TEST_F(AuditProofsToolTest, BeforeTheFirstCheckpointEveryEntryIsPendingAndTheCheckpointEmpty) {
  Append("r1", "o1");
  ASSERT_TRUE(MerkleStore::Open(log_->store(), &tree_).ok());
  LogAuditReader reader(log_->store(), tree_.get());
  audit_ = &reader;
  Json r = Call("get_audit_log", {{"proofs", true}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["checkpoint"], "");
  ASSERT_EQ(r["data"]["events"].size(), 1u);
  EXPECT_EQ(r["data"]["events"][0]["proof_pending"], true);
}

TEST_F(AuditProofsToolTest, AReaderWithoutATreeSaysProofsAreNotConfigured) {
  Append("r1", "o1");
  LogAuditReader reader(log_->store());
  audit_ = &reader;
  Json r = Call("get_audit_log", {{"proofs", true}});
  EXPECT_FALSE(r["success"]);
  EXPECT_EQ(Code(r), "E_NOT_CONFIGURED") << r.dump();
  EXPECT_TRUE(Call("get_audit_log", Json::object())["success"]) << "without proofs it still answers";
}

TEST_F(AuditProofsToolTest, AnExportWithProofsVerifiesAsAChainAndEachRecordAsProvenAndImports) {
  Append("r1", "o1");
  Append("r2", "o2");
  const std::string note = SignCheckpoint();
  Append("r3", "o1");  // pending
  std::ostringstream range, selection;
  ASSERT_TRUE(ExportLog(log_->store(), ExportRange{}, range, nullptr, tree_.get()).ok());
  AuditQuery q;
  q.org_id = "o1";
  ASSERT_TRUE(
      ExportSelection(log_->store(), QueryScope::Tenant("o1"), q, selection, nullptr, tree_.get()).ok());

  for (const std::string& text : {range.str(), selection.str()}) {
    std::istringstream in(text);
    const VerifyReport chain = VerifyExport(in);
    EXPECT_TRUE(chain.ok()) << chain.Summary() << "\n" << text;
    // verify-proof fails a record without a proof, so give it the covered ones.
    std::istringstream lines(text);
    std::string line, covered;
    size_t pending = 0;
    while (std::getline(lines, line)) {
      if (line.find("\"proof_pending\":true") != std::string::npos) ++pending;
      if (line.find("\"proof\":") != std::string::npos) covered += line + "\n";
    }
    EXPECT_EQ(pending, 1u) << text;
    ProofBundle bundle;
    bundle.key = cp_->verifier_key();
    bundle.checkpoints.push_back({"checkpoint", note});
    bundle.records.push_back({"export", covered});
    const ProofReport report = VerifyProofBundle(bundle);
    EXPECT_TRUE(report.ok()) << report.Text();
  }

  // The range export loads into a fresh log, without the proof fields.
  testing::TempDir other;
  std::unique_ptr<EventLog> copy;
  ASSERT_TRUE(EventLog::Open(other.sub("log"), LogOptions{}, &copy).ok());
  std::istringstream in(range.str());
  uint64_t n = 0;
  ASSERT_TRUE(ImportLog(*copy, in, &n).ok());
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(copy->head_hash(), log_->head_hash());
}

}  // namespace
}  // namespace tollgate
