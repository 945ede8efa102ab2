#include "deploy/pipeline.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "approve/approve_stage.h"
#include "audit/audit_query.h"
#include "deploy/identity.h"
#include "decide/decide_stage.h"
#include "execute/execute_stage.h"
#include "ingest/ingest_stage.h"
#include "replay/replay_stage.h"

namespace tollgate {
namespace {

// get_audit_log's reader in the embedded deployment: GetAuditLog on the
// local log, always as the calling agent's org (tenant scope).
class LogAuditReader : public AuditReader {
 public:
  explicit LogAuditReader(const LogStore& store) : store_(store) {}
  Status Query(const std::string& org_id, const Json& q, Json* page) override {
    AuditQuery query;
    query.org_id = org_id;
    query.agent_id = q.value("agent_id", "");
    query.session_id = q.value("session_id", "");
    query.request_id = q.value("request_id", "");
    query.tool = q.value("tool", "");
    query.verdict = q.value("verdict", "");
    query.cursor = q.value("cursor", "");
    query.descending = q.value("descending", false);
    query.limit = q.value("limit", 0);
    query.json_lines = true;
    for (const auto& t : q.value("types", Json::array())) {
      if (!t.is_string()) return Status::Error(errc::kInvalidQuery, "types must be strings");
      query.types.push_back(t);
    }
    for (const char* k : {"since", "until"}) {
      if (!q.contains(k)) continue;
      int64_t us = 0;
      if (!ParseTime(q.value(k, ""), &us)) return Status::Error(errc::kInvalidQuery, std::string(k) + " must be RFC 3339");
      (std::string(k) == "since" ? query.since_us : query.until_us) = us;
    }
    AuditPage p;
    Status s = GetAuditLog(store_, QueryScope::Tenant(org_id), query, &p);
    if (!s.ok()) return s;
    Json events = Json::array();
    for (const auto& line : p.lines) {
      Json e;  // lines of our own log: parse failures stay null, as before
      (void)ParseJson(line, &e);
      events.push_back(std::move(e));
    }
    *page = {{"events", std::move(events)}, {"next_cursor", p.next_cursor}};
    return Status::Ok();
  }

 private:
  const LogStore& store_;
};

}  // namespace

Status WriteEndpoints(const std::string& data_dir, const Json& endpoints) {
  const std::string path = data_dir + "/endpoints.json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << endpoints.dump(2) << "\n";
    if (!out) return Status::Error(errc::kLogIO, "cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Error(errc::kLogIO, "cannot write " + path + ": " + ec.message());
  return Status::Ok();
}

Status ReadEndpoints(const std::string& data_dir, Json* endpoints) {
  const std::string path = data_dir + "/endpoints.json";
  std::ifstream in(path);
  if (!in) {
    return Status::Error(errc::kNotFound, "no " + path + ": is `tollgate up --data " + data_dir +
                                              "` running? (or pass --brokers)");
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseJson(text, endpoints);
}

std::string DefaultPolicyPath() {
  if (const char* env = std::getenv("TOLLGATE_DEFAULT_POLICY"); env != nullptr && *env) return env;
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  for (auto dir = self.parent_path(); !ec && !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
    if (std::filesystem::exists(dir / "config/default-policy.yaml")) return (dir / "config/default-policy.yaml").string();
  }
  return TOLLGATE_SOURCE_DIR "/config/default-policy.yaml";
}

Status Pipeline::Start(const PipelineOptions& options, std::unique_ptr<Pipeline>* out) {
  std::unique_ptr<Pipeline> p(new Pipeline());
  p->options_ = options;
  if (p->options_.policy_path.empty()) p->options_.policy_path = DefaultPolicyPath();
  p->bus_.topics.prefix = options.topic_prefix;
  p->bus_.partitions = options.partitions;
  std::filesystem::create_directories(options.data_dir);
  // The log, keys and workspaces are tollgate's alone (docs/sandbox.md).
  std::error_code mode_ec;
  std::filesystem::permissions(options.data_dir, std::filesystem::perms::owner_all, mode_ec);

  std::string incarnation;
  Status s;
  if (options.brokers.empty()) {
    s = EmbeddedBroker::Start(1, &p->broker_);
    if (!s.ok()) return s;
    for (const auto& t : p->bus_.topics.All()) {
      s = p->broker_->CreateTopic(t, options.partitions);
      if (!s.ok()) return s;
    }
    p->bus_.brokers = p->broker_->bootstrap();
    // The embedded broker starts empty each time: its offsets mean nothing
    // across restarts, so sources carry a fresh incarnation.
    std::random_device rd;
    char buf[24];
    std::snprintf(buf, sizeof buf, "emb-%08x%08x", rd(), rd());
    incarnation = buf;
  } else {
    p->bus_.brokers = options.brokers;
    s = EnsureTopics(p->bus_, std::chrono::seconds(30));
    if (!s.ok()) return s;
    incarnation = "ext";
  }

  LogOptions lo;
  lo.durability = options.durability;
  // request.received carries the whole request: leave it room.
  lo.max_event_bytes = std::max(kDefaultMaxEventBytes, 2 * options.max_request_bytes + (64 << 10));
  s = EventLog::Open(options.data_dir + "/log", lo, &p->log_);
  if (!s.ok()) return s;
  // Stages read request histories from memory when the request began in
  // this process (audit/request_cache.h), else from the log.
  p->cache_ = std::make_unique<RequestCache>();
  p->sink_ = std::make_unique<LogSink>(*p->log_, p->cache_.get());
  p->store_view_ = std::make_unique<StoreLogView>(p->log_->store());
  p->view_ = std::make_unique<CachedLogView>(*p->cache_, *p->store_view_);

  // Who may act, before anything is read from a topic.
  p->credentials_ = std::make_unique<CredentialRegistry>();
  s = SetUpIdentity({options.data_dir, options.tokens_file}, p->log_->store(), *p->sink_, p->credentials_.get(),
                    &p->service_signer_, &p->admin_token_created_);
  if (!s.ok()) return s;
  {
    CredentialRegistry* reg = p->credentials_.get();
    p->sink_->AddListener([reg](const std::vector<Event>& events) { reg->ApplyAll(events); });
  }

  s = Producer::Open(p->bus_, "", &p->reconcile_producer_);
  if (!s.ok()) return s;
  s = p->ReconcileNow();
  if (!s.ok()) return s;

  const Topics& topics = p->bus_.topics;
  // The redaction rules in force (the policy's redact section), for every
  // stage that logs (docs/redaction.md); set from the policy in force below.
  auto redactor = std::make_shared<RedactorInForce>();
  p->sink_->AddListener([redactor](const std::vector<Event>& events) { redactor->OnAppended(events); });
  // Execute's section of a policy document, with this deployment's
  // overrides: what a policy.updated puts in force for execute.
  const std::string data_dir = options.data_dir, tools_dir = options.tools_dir, workspace_root = options.workspace_root;
  auto execute_policy_of = [data_dir, tools_dir, workspace_root](const Json& doc, ExecutePolicy* out) {
    Status st = ExecutePolicyFromJson(doc, data_dir, out);
    if (!st.ok()) return st;
    if (!tools_dir.empty()) out->tools_dir = tools_dir;
    if (!workspace_root.empty()) out->workspace_root = workspace_root;
    return Status::Ok();
  };
  IngestConfig ic;
  ic.redactor = redactor;
  ic.topics = topics;
  ic.max_request_bytes = options.max_request_bytes;
  ic.credentials = p->credentials_.get();
  ic.max_skew_us = options.max_signature_skew_us;
  p->stages_.push_back(std::make_unique<IngestStage>(ic));
  // decide: fold the log (policy in force, budget ledger) before any
  // runner starts, then see every appended group through the listener.
  DecideConfig dc{topics, p->options_.policy_path};
  dc.redactor = redactor;
  // Never log as in force a policy execute would not enforce.
  dc.validate = [execute_policy_of](const Json& doc) {
    ExecutePolicy unused;
    return execute_policy_of(doc, &unused);
  };
  auto decide = std::make_unique<DecideStage>(std::move(dc));
  const DecideStage* decide_stage = decide.get();
  {
    const LogStore& store = p->log_->store();
    s = decide->Rebuild(p->log_->head_seq(), [&store](uint64_t seq, Event* e) { return store.ReadEvent(seq, e); },
                        options.data_dir + "/decide-ledger.snapshot");
    if (!s.ok()) return s;
    // Fail at start rather than hold every request: with no policy in the
    // log, the file must load now.
    PolicyPtr file_policy;
    Status fs = LoadPolicyFile(p->options_.policy_path, &file_policy);
    if (!fs.ok() && !decide->policy().has_policy()) return fs;
    if (!fs.ok()) std::cerr << "tollgate: " << fs.message() << "; keeping the policy in force from the log\n";
    if (decide->policy().has_policy()) {
      std::shared_ptr<const Redactor> r;
      if (Redactor::FromPolicy(decide->policy().file()->doc(), &r).ok()) redactor->set(r);
    } else if (fs.ok()) {
      std::shared_ptr<const Redactor> r;
      if (Redactor::FromPolicy(file_policy->doc(), &r).ok()) redactor->set(r);
    }
    DecideStage* d = decide.get();
    p->sink_->AddListener([d](const std::vector<Event>& events) { d->OnAppended(events); });
  }
  p->stages_.push_back(std::move(decide));
  {
    ApproveConfig ac;
    ac.topics = topics;
    ac.webhooks.urls = options.webhooks;
    ac.authenticate = RegistryAuthenticator(p->credentials_.get(), options.max_signature_skew_us);
    auto approve = std::make_unique<ApproveStage>(ac);
    // Pending approvals (and their deadlines) are a fold over the log.
    s = approve->Load(p->log_->store());
    if (!s.ok()) return s;
    ApproveStage* raw = approve.get();
    // Its listener reads the log itself: it runs before the cache has the group.
    raw->SetLogView(p->store_view_.get());
    p->sink_->AddListener([raw](const std::vector<Event>& events) { raw->OnAppended(events); });
    p->approve_ = raw;
    p->stages_.push_back(std::move(approve));
  }
  if (options.replay_from.empty()) {
    // Execute enforces the policy in force: the log's when it has one (the
    // file's comes into force when decide logs it), else the file's.
    auto policy = std::make_shared<ExecutePolicy>();
    const PolicyInForce in_force = decide_stage->policy();
    if (in_force.has_policy()) {
      s = execute_policy_of(in_force.file()->doc(), policy.get());
      if (!s.ok()) std::cerr << "tollgate: the execute section in force does not load (" << s.message() << "); using the file's\n";
    }
    if (!in_force.has_policy() || !s.ok()) {
      s = LoadExecutePolicy(p->options_.policy_path, options.data_dir, policy.get());
      if (!s.ok()) return s;
      if (!options.tools_dir.empty()) policy->tools_dir = options.tools_dir;
      if (!options.workspace_root.empty()) policy->workspace_root = options.workspace_root;
    }
    p->audit_reader_ = std::make_unique<LogAuditReader>(p->log_->store());
    ExecuteConfig ec;
    ec.topics = topics;
    ec.policy = policy;
    ec.audit = p->audit_reader_.get();
    ec.policy_from_doc = execute_policy_of;
    ec.redactor = redactor;
    auto execute = std::make_unique<ExecuteStage>(ec);
    ExecuteStage* x = execute.get();
    p->sink_->AddListener([x](const std::vector<Event>& events) { x->OnAppended(events); });
    p->stages_.push_back(std::move(execute));
  } else {
    // Recorded-result replay: replay/'s stage takes execute's place (no
    // executor is built, so nothing can run a tool).
    p->stages_.emplace_back();
    s = replay::MakeReplayStage(topics, options.replay_from, options.replay_session, p->log_->store(),
                                &p->stages_.back());
    if (!s.ok()) return s;
  }
  Pipeline* raw = p.get();
  for (auto& stage : p->stages_) {
    RunnerOptions ro;
    ro.bus = p->bus_;
    ro.incarnation = incarnation;
    ro.max_batch = options.max_batch;
    ro.max_event_bytes = lo.max_event_bytes;
    ro.on_offset_lost = [raw](const Status&) {
      Status r = raw->ReconcileNow();
      if (!r.ok()) std::cerr << "tollgate: reconcile after offset loss failed: " << r.ToString() << "\n";
    };
    auto runner = std::make_unique<StageRunner>(*stage, *p->sink_, *p->view_, ro);
    s = runner->Start();
    if (!s.ok()) return s;
    p->runners_.push_back(std::move(runner));
  }
  for (auto& runner : p->runners_) {
    p->threads_.emplace_back([r = runner.get()] {
      Status st = r->Run();
      if (!st.ok()) std::cerr << "tollgate: stage stopped: " << st.ToString() << "\n";
    });
  }
  if (!options.http_listen.empty()) {
    ApiOptions ao;
    if (!ParseListen(options.http_listen, &ao.host, &ao.port)) {
      return Status::Error(errc::kInvalidQuery, "--http must be HOST:PORT, not '" + options.http_listen + "'");
    }
    ao.credentials = p->credentials_.get();
    ao.sink = p->sink_.get();
    ao.service_signer = p->service_signer_;
    ao.bus = p->bus_;
    s = ApiServer::Start(std::move(ao), p->log_->store(), &p->api_);
    if (!s.ok()) return s;
  }
  if (options.write_endpoints) {
    Json ep{{"bootstrap", p->bus_.brokers}, {"topic_prefix", options.topic_prefix},
            {"log", options.data_dir + "/log"}, {"embedded_broker", options.brokers.empty()}, {"pid", getpid()}};
    if (p->api_) ep["http"] = p->api_->url();
    s = WriteEndpoints(options.data_dir, ep);
    if (!s.ok()) return s;
  }
  *out = std::move(p);
  return Status::Ok();
}

Status Pipeline::AppendCredentialEvent(const Event& e) { return AppendOne(*sink_, e); }

Status Pipeline::ReconcileNow() {
  std::lock_guard<std::mutex> lock(reconcile_mu_);
  return Reconcile(log_->store(), *sink_, *reconcile_producer_, bus_.topics, &reconciled_);
}

uint64_t Pipeline::retries() const {
  uint64_t n = 0;
  for (const auto& r : runners_) n += r->stats().retries.load();
  return n;
}

Json Pipeline::stats() const {
  Json out = Json::object();
  for (size_t i = 0; i < runners_.size(); ++i) {
    const RunnerStats& st = runners_[i]->stats();
    out[stages_[i]->name()] = {{"messages", st.messages.load()},     {"batches", st.batches.load()},
                               {"events", st.events.load()},         {"outputs", st.outputs.load()},
                               {"retries", st.retries.load()},       {"process_us", st.process_us.load()},
                               {"append_us", st.append_us.load()},   {"publish_us", st.publish_us.load()},
                               {"publish_wait_us", st.publish_wait_us.load()},
                               {"pipelined", st.pipelined.load()},   {"deferred", st.deferred.load()},
                               {"already_committed", st.already_committed.load()}};
  }
  return out;
}

void Pipeline::Stop() {
  for (auto& r : runners_) r->Stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

Pipeline::~Pipeline() {
  api_.reset();  // it reads the log
  Stop();
  runners_.clear();
  reconcile_producer_.reset();
  log_.reset();
  broker_.reset();
}

}  // namespace tollgate
