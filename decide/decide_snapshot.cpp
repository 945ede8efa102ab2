#include "decide/decide_snapshot.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/log.h"
#include "core/sha256.h"

namespace tollgate {

namespace {
// v5: the session facts (decide/session_facts.h); v4: the ledger prunes (decide-ledger.v3)
constexpr const char* kSnapshotFormat = "decide-snapshot.v5";
constexpr int64_t kSnapshotEveryUs = 300'000'000;
constexpr uint64_t kSnapshotMinEvents = 1000;

// The state a snapshot file holds, and the seq it covers; false with *why
// when the file is unusable (an absent file says nothing: *why stays "").
bool ReadSnapshot(const std::string& path, uint64_t head_seq, const ReadEventFn& read, DecideState* out,
                  uint64_t* seq, std::string* why) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  Json file;
  if (!ParseJson(ss.str(), &file).ok() || !file.is_object() || !file.contains("body") ||
      !file["body"].is_object()) {
    *why = "unreadable";
    return false;
  }
  const Json& body = file["body"];
  std::string bytes;
  (void)CanonicalBytes(body, &bytes);
  if (file.value("sha256", "") != Sha256Hex(bytes) || body.value("format", "") != kSnapshotFormat) {
    *why = "checksum or format mismatch";
    return false;
  }
  *seq = body.value("seq", uint64_t{0});
  Event at;
  if (*seq > head_seq || (*seq > 0 && (!read(*seq, &at).ok() || at.id != body.value("event_id", "")))) {
    *why = "stale (the log does not have the event it covers)";
    return false;
  }
  DecideState state;
  Status s = BudgetLedger::Deserialize(body.value("ledger", ""), &state.mutable_ledger());
  if (s.ok() && body.contains("policy") && body["policy"].is_object()) {
    PolicyPtr pol;
    s = LoadPolicyJson(body["policy"]["doc"], body["policy"].value("source", ""), &pol);
    if (s.ok()) state.SetFilePolicy(pol);
  }
  for (const auto& r : body.value("local", Json::array())) {
    if (s.ok()) s = state.AddLocalRule(r);
  }
  if (s.ok()) s = SessionFacts::FromJson(body.value("session_facts", Json::object()), &state.mutable_facts());
  const Json executors = body.value("executors", Json::object());  // items() must not outlive it
  for (const auto& [executor, names] : executors.items()) {
    if (!names.is_array()) continue;
    for (const auto& n : names) {
      if (n.is_string()) state.mutable_executors().cli[executor].insert(n.get<std::string>());
    }
  }
  const Json written = body.value("agent_written", Json::object());
  for (const auto& [agent, tools] : written.items()) {
    if (!tools.is_object()) continue;
    for (const auto& [name, sha] : tools.items()) {
      if (sha.is_string()) state.mutable_executors().agent_written[agent][name] = sha.get<std::string>();
    }
  }
  if (!s.ok()) {
    *why = s.ToString();
    return false;
  }
  *out = std::move(state);
  return true;
}

}  // namespace

Status RebuildDecideState(uint64_t head_seq, const ReadEventFn& read, const std::string& snapshot_path,
                          DecideState* state, bool* from_snapshot) {
  if (from_snapshot != nullptr) *from_snapshot = false;
  *state = DecideState();
  uint64_t start = 1;
  if (!snapshot_path.empty()) {
    uint64_t seq = 0;
    std::string why;
    if (ReadSnapshot(snapshot_path, head_seq, read, state, &seq, &why)) {
      // A snapshot taken while stages were appending may lack a group
      // whose listener call was still running (listeners of different
      // stages can run out of seq order): fold a margin before it again.
      // The fold is idempotent, so this only costs time.
      start = seq + 1 > kRefoldMargin ? seq + 1 - kRefoldMargin : 1;
      if (from_snapshot != nullptr) *from_snapshot = true;
    } else if (!why.empty()) {
      log::Warn({"decide"}) << "ignoring snapshot " << snapshot_path << ": " << why
                            << "; folding the whole log\n";
    }
  }
  Event e;
  std::string last_id;
  for (uint64_t seq = start; seq <= head_seq; ++seq) {
    Status s = read(seq, &e);
    if (!s.ok()) return s;
    s = state->Apply(e);
    if (!s.ok())
      log::Error({"decide"}) << "policy.updated at seq " << e.seq << " not applied: " << s.ToString() << "\n";
    last_id = e.id;
    state->MaybePrune();
  }
  // The snapshot written next names the head's event, which the loop may
  // not have read (a snapshot covering the head).
  if (!snapshot_path.empty() && head_seq > 0 && last_id.empty()) {
    Status s = read(head_seq, &e);
    if (!s.ok()) return s;
    last_id = e.id;
  }
  state->CoverTo(head_seq, last_id);
  state->Prune();
  return Status::Ok();
}

Status WriteDecideSnapshot(const std::string& path, const DecideState& state, uint64_t seq,
                           const std::string& event_id) {
  Json body = {{"format", kSnapshotFormat},
               {"seq", seq},
               {"event_id", event_id},
               {"ledger", state.ledger().Serialize()},
               {"session_facts", state.facts().ToJson()},
               {"local", state.local_rules()}};
  Json executors = Json::object();
  for (const auto& [executor, names] : state.executors().cli) executors[executor] = names;
  body["executors"] = std::move(executors);
  body["agent_written"] = state.executors().agent_written;
  if (state.policy().has_policy()) {
    body["policy"] = {{"doc", state.policy().file()->doc()}, {"source", state.policy().file()->source()}};
  }
  std::string bytes, out;
  Status s = CanonicalBytes(body, &bytes);
  if (s.ok()) s = CanonicalBytes(Json{{"body", body}, {"sha256", Sha256Hex(bytes)}}, &out);
  if (!s.ok()) return s;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << out;
    if (!f) return Status::Error(errc::kLogIO, "cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Error(errc::kLogIO, "cannot write " + path + ": " + ec.message());
  return Status::Ok();
}

Status DecideSnapshots::Write(const DecideState& state) {
  if (path_.empty()) return Status::Ok();
  Status s = WriteDecideSnapshot(path_, state, state.max_seq(), state.max_seq_id());
  if (s.ok()) covered_seq_ = state.max_seq();
  return s;
}

void DecideSnapshots::MaybeWrite(const DecideState& state, int64_t now_us) {
  if (path_.empty() || state.max_seq() < covered_seq_ + kSnapshotMinEvents ||
      now_us - last_us_ < kSnapshotEveryUs) {
    return;
  }
  last_us_ = now_us;
  Status s = Write(state);
  if (!s.ok()) log::Warn({"decide"}) << "snapshot not written: " << s.ToString() << "\n";
}

}  // namespace tollgate
