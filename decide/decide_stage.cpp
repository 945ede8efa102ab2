#include "decide/decide_stage.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/sha256.h"

namespace tollgate {

namespace {
// policy.updated of a file applies to every org of this deployment.
constexpr const char* kAllOrgs = "*";
constexpr const char* kSnapshotFormat = "decide-snapshot.v3";  // v3: the ledger keyed by (org, request)
// Events folded again before a snapshot's seq (see Rebuild).
constexpr uint64_t kRefoldMargin = 4096;
// Tick writes a snapshot at most this often, and only after this many new
// events, so a restart folds little even after a long run.
constexpr int64_t kSnapshotEveryUs = 300'000'000;
constexpr uint64_t kSnapshotMinEvents = 1000;
}  // namespace

Event PolicyUpdatedEvent(const Policy& policy, int64_t time_us) {
  Event e;
  e.type = "policy.updated";
  e.id = MakeEventId(e.type, "", "file:" + policy.content_hash());
  e.time_us = time_us;
  e.org_id = kAllOrgs;
  e.data = {{"tier", "file"},
            {"source", policy.source()},
            {"policy", policy.doc()},
            {"content_hash", policy.content_hash()},
            {"policy_version", policy.version()}};
  return e;
}

void DecideStage::Fold(const Event& e) {
  if (e.seq > max_seq_seen_) {
    max_seq_seen_ = e.seq;
    max_seq_id_ = e.id;
  }
  if (e.type == "policy.updated") {
    Status s = policy_.Apply(e);
    if (!s.ok()) {
      std::cerr << "tollgate decide: policy.updated at seq " << e.seq << " not applied: " << s.ToString() << "\n";
    } else if (e.data.value("tier", "") == "agent_local") {
      const std::string h = e.data.value("content_hash", "");
      bool seen = false;
      for (const auto& r : local_rules_) seen = seen || r.value("content_hash", "") == h;
      if (!seen) {
        Json rule = e.data;
        if (!rule.contains("org_id")) rule["org_id"] = e.org_id;
        if (!rule.contains("agent_id")) rule["agent_id"] = e.agent_id;
        local_rules_.push_back(std::move(rule));
      }
    }
    return;
  }
  ledger_.Apply(e);
}

void DecideStage::OnAppended(const std::vector<Event>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Event& e : events) Fold(e);
}

void DecideStage::UsePolicy(PolicyPtr policy) {
  std::lock_guard<std::mutex> lock(mu_);
  policy_.SetFile(std::move(policy));
}

PolicyInForce DecideStage::policy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return policy_;
}

BudgetLedger DecideStage::ledger() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ledger_;
}

Status DecideStage::WriteSnapshotLocked(uint64_t seq, const std::string& event_id) {
  Json body = {{"format", kSnapshotFormat}, {"seq", seq}, {"event_id", event_id},
               {"ledger", ledger_.Serialize()}, {"local", local_rules_}};
  if (policy_.has_policy()) {
    body["policy"] = {{"doc", policy_.file()->doc()}, {"source", policy_.file()->source()}};
  }
  std::string bytes, out;
  Status s = CanonicalBytes(body, &bytes);
  if (s.ok()) s = CanonicalBytes(Json{{"body", body}, {"sha256", Sha256Hex(bytes)}}, &out);
  if (!s.ok()) return s;
  const std::string tmp = snapshot_path_ + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << out;
    if (!f) return Status::Error(errc::kLogIO, "cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, snapshot_path_, ec);
  if (ec) return Status::Error(errc::kLogIO, "cannot write " + snapshot_path_ + ": " + ec.message());
  snapshot_seq_ = seq;
  return Status::Ok();
}

Status DecideStage::Rebuild(uint64_t head_seq, const ReadEventFn& read, const std::string& snapshot_path,
                            bool* from_snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (from_snapshot != nullptr) *from_snapshot = false;
  snapshot_path_ = snapshot_path;
  uint64_t start = 1;
  bool loaded = false;
  // Snapshot: {"body": {format, seq, event_id, ledger, policy, local}, "sha256": ...}.
  if (!snapshot_path.empty()) {
    std::ifstream f(snapshot_path, std::ios::binary);
    if (f) {
      std::stringstream ss;
      ss << f.rdbuf();
      Json file;
      std::string why;
      if (!ParseJson(ss.str(), &file).ok() || !file.is_object() || !file.contains("body")) {
        why = "unreadable";
      } else {
        std::string bytes;
        const Json& body = file["body"];
        (void)CanonicalBytes(body, &bytes);
        Event at;
        uint64_t seq = body.value("seq", uint64_t{0});
        if (file.value("sha256", "") != Sha256Hex(bytes) || body.value("format", "") != kSnapshotFormat) {
          why = "checksum or format mismatch";
        } else if (seq > head_seq || (seq > 0 && (!read(seq, &at).ok() || at.id != body.value("event_id", "")))) {
          why = "stale (the log does not have the event it covers)";
        } else {
          BudgetLedger l;
          PolicyInForce p;
          Status s = BudgetLedger::Deserialize(body.value("ledger", ""), &l);
          if (s.ok() && body.contains("policy") && body["policy"].is_object()) {
            PolicyPtr pol;
            s = LoadPolicyJson(body["policy"]["doc"], body["policy"].value("source", ""), &pol);
            if (s.ok()) p.SetFile(pol);
          }
          std::vector<Json> local;
          for (const auto& r : body.value("local", Json::array())) {
            if (!s.ok()) break;
            std::vector<std::string> allow;
            for (const auto& a : r.value("allow", Json::array())) allow.push_back(a.get<std::string>());
            s = p.AddAgentLocal(r.value("org_id", ""), r.value("agent_id", ""), allow, r.value("content_hash", ""));
            local.push_back(r);
          }
          if (s.ok()) {
            ledger_ = std::move(l);
            policy_ = std::move(p);
            local_rules_ = std::move(local);
            // A snapshot taken while stages were appending may lack a group
            // whose listener call was still running (listeners of different
            // stages can run out of seq order): fold a margin before it
            // again. The fold is idempotent, so this only costs time.
            start = seq + 1 > kRefoldMargin ? seq + 1 - kRefoldMargin : 1;
            loaded = true;
            if (from_snapshot != nullptr) *from_snapshot = true;
          } else {
            why = s.ToString();
          }
        }
      }
      if (!why.empty()) std::cerr << "tollgate decide: ignoring snapshot " << snapshot_path << ": " << why
                                  << "; folding the whole log\n";
    }
  }
  if (!loaded) {
    ledger_ = BudgetLedger();
    policy_ = PolicyInForce();
    local_rules_.clear();
  }
  Event e;
  std::string last_id;
  for (uint64_t seq = start; seq <= head_seq; ++seq) {
    Status s = read(seq, &e);
    if (!s.ok()) return s;
    Fold(e);
    last_id = e.id;
  }
  ledger_.set_applied_seq(std::max(ledger_.applied_seq(), head_seq));
  max_seq_seen_ = std::max(max_seq_seen_, head_seq);
  if (snapshot_path.empty()) return Status::Ok();
  if (head_seq > 0 && last_id.empty()) {
    Event head;
    Status s = read(head_seq, &head);
    if (!s.ok()) return s;
    last_id = head.id;
  }
  return WriteSnapshotLocked(head_seq, last_id);
}

StageResult DecideStage::Tick(const StageContext& ctx, const LogView& log) {
  StageResult r;
  std::lock_guard<std::mutex> lock(mu_);
  if (!snapshot_path_.empty() && max_seq_seen_ >= snapshot_seq_ + kSnapshotMinEvents &&
      ctx.now_us - last_snapshot_us_ >= kSnapshotEveryUs) {
    last_snapshot_us_ = ctx.now_us;
    Status s = WriteSnapshotLocked(max_seq_seen_, max_seq_id_);
    if (!s.ok()) std::cerr << "tollgate decide: snapshot not written: " << s.ToString() << "\n";
  }
  if (config_.policy_path.empty()) return r;
  struct stat st {};
  if (::stat(config_.policy_path.c_str(), &st) != 0) {
    if (file_error_.empty()) {
      file_error_ = "cannot read policy file '" + config_.policy_path + "'";
      std::cerr << "tollgate decide: " << file_error_
                << (policy_.has_policy() ? "; the policy in force stays" : "; no policy in force") << "\n";
    }
    file_mtime_ns_ = file_size_ = -1;
    return r;
  }
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (mtime != file_mtime_ns_ || st.st_size != file_size_) {
    file_mtime_ns_ = mtime;
    file_size_ = st.st_size;
    std::ifstream f(config_.policy_path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    const std::string h = Sha256Hex(text);
    if (h != file_bytes_hash_) {
      file_bytes_hash_ = h;
      PolicyPtr p;
      Status s = LoadPolicyYaml(text, config_.policy_path, &p);
      if (s.ok() && config_.validate) s = config_.validate(p->doc());
      if (s.ok()) {
        file_policy_ = std::move(p);
        file_error_.clear();
      } else {
        file_policy_ = nullptr;
        file_error_ = s.message();
        std::cerr << "tollgate decide: policy file refused: " << config_.policy_path << ": " << s.message()
                  << (policy_.has_policy() ? "; the policy in force stays (" + policy_.version() + ")"
                                           : std::string("; no policy in force"))
                  << "\n";
      }
    }
  }
  // Emit until the file's policy is in force: the event id is the content
  // hash, so a repeat (an append that failed, a tick before the listener
  // ran) appends nothing new.
  if (file_policy_ != nullptr &&
      (!policy_.has_policy() || policy_.file()->content_hash() != file_policy_->content_hash())) {
    r.events.push_back(PolicyUpdatedEvent(*file_policy_, ctx.now_us));
  }
  return r;
}

StageResult DecideStage::Process(const Message& in, const StageContext& ctx, const LogView& log) {
  Flow flow;
  std::vector<Event> history;
  StageResult r;
  if (!ReadFlow(name(), config_.topics, in, ctx, log, &flow, &history, &r)) return r;
  RequestState state = Summarize(history);
  Json decision;
  if (state.decision != nullptr) {
    // Decided before. The same message read again after a crash re-emits the
    // recorded decision; any other copy is a duplicate and ends here.
    if (SourceOf(state.decision) != ctx.source) return r;
    decision = DecisionFromLog(state.decision->data);  // its secrets redacted (docs/redaction.md)
  } else {
    // Decisions depend on the request's received_at, never the wall clock.
    int64_t received_at = 0;
    if (!ParseTime(flow.received_at, &received_at)) {
      received_at = state.received != nullptr ? state.received->time_us : 0;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!policy_.has_policy()) {
      r.error = Status::Error(errc::kNoPolicy, "no policy in force yet" +
                                                   (file_error_.empty() ? std::string() : ": " + file_error_));
      return r;
    }
    DecideInput input{&flow.request, received_at};
    decision = Decide(policy_, ledger_, input);
    // Before the ledger sees it: an oversize invocation is a deny, and
    // holds no budget (core/messages.h, BoundDecision).
    BoundDecision(&decision);
    ledger_.ApplyDecision(flow.request_id(), flow.request, decision);
    Json logged = LoggedDecision(decision, config_.redactor ? *config_.redactor->get() : *DefaultRedactor());
    logged["source"] = ctx.source;
    r.events.push_back(FlowEvent(flow, "decision.made", ctx.now_us, std::move(logged)));
  }
  flow.decision = decision;
  if (decision["verdict"] == "allow") {
    r.outputs.push_back({MessageFor(config_.topics.execute(), flow.request, flow.ToJson()), -1});
  } else if (decision["verdict"] == "ask") {
    r.outputs.push_back({MessageFor(config_.topics.approve(), flow.request, flow.ToJson()), -1});
  } else {
    const std::string code = decision.value("error_code", errc::kPolicyDenied);
    Json result = MakeResult(flow.request, "denied", decision, nullptr,
                             ToolResultError(code, decision.value("reason", "denied by policy"), false));
    if (state.decision != nullptr) result["log_seq"] = state.decision->seq;
    RedactResult(&result, config_.redactor ? *config_.redactor->get() : *DefaultRedactor());
    r.outputs.push_back({MessageFor(config_.topics.results(), flow.request, result), r.events.empty() ? -1 : 0});
  }
  return r;
}

}  // namespace tollgate
