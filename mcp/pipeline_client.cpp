#include "mcp/pipeline_client.h"

#include "core/trace.h"

namespace tollgate::mcp {

Status PipelineClient::Open(const BusConfig& bus, std::unique_ptr<PipelineClient>* out) {
  std::unique_ptr<PipelineClient> c(new PipelineClient());
  c->bus_ = bus;
  Status s = Consumer::OpenTail(bus, bus.topics.results(), std::chrono::seconds(10), &c->results_);
  if (!s.ok()) return s;
  s = Producer::Open(bus, "", &c->producer_);
  if (s.ok()) s = c->producer_->Warm({bus.topics.requests(), bus.topics.approval_responses()}, std::chrono::seconds(10));
  if (!s.ok()) return s;
  PipelineClient* self = c.get();
  c->thread_ = std::thread([self] { self->Dispatch(); });
  *out = std::move(c);
  return Status::Ok();
}

PipelineClient::~PipelineClient() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void PipelineClient::Dispatch() {
  std::vector<Message> batch;
  while (!stop_) {
    batch.clear();
    results_->Poll(256, std::chrono::milliseconds(100), &batch);
    for (const Message& m : batch) {
      Json r;
      if (!ParseInputJson(m.value, &r).ok() || !r.is_object()) continue;
      const Json org = r.value("org_id", Json()), rid = r.value("request_id", Json());
      if (!org.is_string() || !rid.is_string()) continue;
      // The result's trace context, for the tools/call result's _meta.
      if (std::string tp = TraceparentOf(m); !tp.empty()) r["traceparent"] = tp;
      std::shared_ptr<Waiter> w;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = waiters_.find({org.get<std::string>(), rid.get<std::string>()});
        if (it == waiters_.end()) continue;
        w = it->second;
      }
      std::lock_guard<std::mutex> lock(w->mu);
      if (!w->result) w->result = std::move(r);  // the first result is the one
      w->cv.notify_all();
    }
  }
}

std::shared_ptr<PipelineClient::Waiter> PipelineClient::Expect(const std::string& org_id,
                                                               const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& w = waiters_[{org_id, request_id}];
  if (!w) w = std::make_shared<Waiter>();
  return w;
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
