#include "mcp/pipeline_client.h"

#include "core/log.h"
#include "core/result_signature.h"
#include "core/trace.h"

namespace tollgate::mcp {

Status PipelineClient::Open(const BusConfig& bus, GateKeys gate_keys, std::unique_ptr<PipelineClient>* out) {
  std::unique_ptr<PipelineClient> c(new PipelineClient());
  c->bus_ = bus;
  c->gate_keys_ = std::move(gate_keys);
  Status s = Producer::Open(bus, "", &c->producer_);
  if (s.ok())
    s = c->producer_->Warm({bus.topics.requests(), bus.topics.approval_responses()},
                           std::chrono::seconds(10));
  if (!s.ok()) return s;
  *out = std::move(c);
  return Status::Ok();
}

PipelineClient::~PipelineClient() {
  stop_ = true;
  std::lock_guard<std::mutex> lock(tails_mu_);
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

Status PipelineClient::TailLocked(const std::string& topic) {
  if (tails_.count(topic)) return Status::Ok();
  Status s = EnsureTopic(bus_, topic, std::chrono::seconds(10));
  std::unique_ptr<Consumer> c;
  if (s.ok()) s = Consumer::OpenTail(bus_, topic, std::chrono::seconds(10), &c);
  if (!s.ok()) return s;
  Consumer* raw = c.get();
  tails_[topic] = std::move(c);
  threads_.emplace_back([this, raw] { Dispatch(raw); });
  return Status::Ok();
}

void PipelineClient::Dispatch(Consumer* c) {
  std::vector<Message> batch;
  while (!stop_) {
    batch.clear();
    c->Poll(256, std::chrono::milliseconds(100), &batch);
    for (const Message& m : batch) Deliver(m);
  }
}

void PipelineClient::Deliver(const Message& m) {
  // Which call it claims to be for; the signature decides whether it is.
  Json claimed;
  // Results wrap a tool's answer a few levels deep: read as an internal
  // document (bounded all the same), not as an agent's input.
  if (!ParseJson(m.value, &claimed, {kMaxJsonDepth, kMaxMessageBytes}).ok() || !claimed.is_object()) return;
  const Json org = claimed.value("org_id", Json()), rid = claimed.value("request_id", Json());
  if (!org.is_string() || !rid.is_string()) return;
  std::shared_ptr<Waiter> w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = waiters_.find({org.get<std::string>(), rid.get<std::string>()});
    if (it == waiters_.end()) return;
    w = it->second;
  }
  Json r;
  Status s = VerifyResult(m, gate_keys_ ? gate_keys_() : std::vector<Ed25519Verifier>{},
                          {org.get<std::string>(), w->agent, rid.get<std::string>()}, &r);
  if (!s.ok()) {
    ++refused_;
    log::Warn({"mcp", rid.get<std::string>()}) << "refused a message on " << m.topic << " for "
                                               << rid.get<std::string>() << ": " << s.message() << "\n";
    return;
  }
  // The result's trace context, for the tools/call result's _meta.
  if (std::string tp = TraceparentOf(m); !tp.empty()) r["traceparent"] = tp;
  std::lock_guard<std::mutex> lock(w->mu);
  if (!IsFinalStatus(r.value("status", ""))) {
    w->pending_ = std::move(r);
    return;
  }
  if (!w->result) w->result = std::move(r);  // the first final result is the one
  w->cv.notify_all();
}

Status PipelineClient::Expect(const std::string& org_id, const std::string& agent_id,
                              const std::string& request_id, std::shared_ptr<Waiter>* out) {
  {
    std::lock_guard<std::mutex> lock(tails_mu_);
    if (stop_) return Status::Error(errc::kKafka, "closing");
    Status s = TailLocked(bus_.topics.results_for(org_id));
    if (!s.ok()) return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto& w = waiters_[{org_id, request_id}];
  if (!w) {
    w = std::make_shared<Waiter>();
    w->agent = agent_id;
  }
  *out = w;
  return Status::Ok();
}

void PipelineClient::Forget(const std::string& org_id, const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  waiters_.erase({org_id, request_id});
}

Status PipelineClient::Publish(const Message& m, std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(producer_mu_);
  Status s = producer_->Send(m);
  if (s.ok()) s = producer_->Flush(timeout);
  return s;
}

std::optional<Json> PipelineClient::Waiter::pending() {
  std::lock_guard<std::mutex> lock(mu);
  return pending_;
}

std::optional<Json> PipelineClient::Waiter::Wait(std::chrono::steady_clock::time_point until,
                                                 const std::function<bool()>& stop,
                                                 const std::function<void()>& tick) {
  std::unique_lock<std::mutex> lock(mu);
  while (!result) {
    if (std::chrono::steady_clock::now() >= until || (stop && stop())) return std::nullopt;
    cv.wait_for(lock, std::chrono::milliseconds(100));
    if (!result && tick) {
      lock.unlock();
      tick();
      lock.lock();
    }
  }
  return result;
}

}  // namespace tollgate::mcp
