#include "mcp/pipeline_client.h"

#include "core/log.h"
#include "core/result_signature.h"
#include "core/trace.h"

namespace tollgate::mcp {

namespace {
constexpr std::chrono::seconds kOpenTimeout{10};
}  // namespace

Status PipelineClient::Open(const BusConfig& bus, GateKeys gate_keys, std::unique_ptr<PipelineClient>* out) {
  std::unique_ptr<PipelineClient> c(new PipelineClient());
  c->bus_ = bus;
  c->topics_ = bus.topics;
  c->gate_keys_ = std::move(gate_keys);
  Status s = Producer::Open(bus, "", &c->producer_);
  if (s.ok()) s = c->producer_->Warm({bus.topics.requests(), bus.topics.approval_responses()}, kOpenTimeout);
  if (!s.ok()) return s;
  c->maintainer_ = std::thread([p = c.get()] { p->Maintain(); });
  *out = std::move(c);
  return Status::Ok();
}

PipelineClient::~PipelineClient() {
  {
    std::lock_guard<std::mutex> lock(follow_mu_);
    stop_ = true;
  }
  follow_cv_.notify_all();
  if (maintainer_.joinable()) maintainer_.join();
  std::lock_guard<std::mutex> lock(tails_mu_);
  for (auto& [topic, t] : tails_) {
    if (t->thread.joinable()) t->thread.join();
  }
}

Status PipelineClient::OpenTail(const BusConfig& bus, const std::string& topic, std::unique_ptr<Tail>* out) {
  auto t = std::make_unique<Tail>();
  Status s = EnsureTopic(bus, topic, kOpenTimeout);
  if (s.ok()) s = Consumer::OpenTail(bus, topic, kOpenTimeout, &t->consumer);
  if (!s.ok()) return s;
  *out = std::move(t);
  return Status::Ok();
}

void PipelineClient::Start(Tail* t) {
  t->thread = std::thread([this, t] { Dispatch(t); });
}

Status PipelineClient::TailLocked(const std::string& topic) {
  if (tails_.count(topic)) return Status::Ok();
  std::unique_ptr<Tail> t;
  Status s = OpenTail(bus_, topic, &t);
  if (!s.ok()) return s;
  Start(t.get());
  tails_[topic] = std::move(t);
  return Status::Ok();
}

void PipelineClient::Dispatch(Tail* t) {
  std::vector<Message> batch;
  while (!stop_ && !t->stop) {
    batch.clear();
    t->consumer->Poll(256, std::chrono::milliseconds(100), &batch);
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
    Status s = TailLocked(topics_.results_for(org_id));
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

void PipelineClient::PublishOrRetry(MakeMessage make) {
  Message m;
  Status s = make(&m);
  // Briefly: the caller holds its call (and, over stdio, its reader).
  if (s.ok()) s = Publish(m, std::chrono::seconds(3));
  if (s.ok()) return;
  log::Warn({"mcp", ""}) << "not sent yet (tried again each second): " << s.ToString() << "\n";
  std::lock_guard<std::mutex> lock(follow_mu_);
  if (retry_.size() >= kMaxRetried) {
    log::Error({"mcp", ""}) << "over " << kMaxRetried
                            << " messages waiting to be sent: the oldest is dropped\n";
    retry_.pop_front();
  }
  retry_.push_back(std::move(make));
}

void PipelineClient::RetryPending() {
  std::deque<MakeMessage> todo;
  {
    std::lock_guard<std::mutex> lock(follow_mu_);
    todo.swap(retry_);
  }
  while (!todo.empty() && !stop_) {
    Message m;
    Status s = todo.front()(&m);
    if (s.ok()) s = Publish(m, std::chrono::seconds(2));
    if (!s.ok()) break;  // still down: the rest wait with it
    todo.pop_front();
  }
  if (todo.empty()) return;
  std::lock_guard<std::mutex> lock(follow_mu_);
  for (auto it = todo.rbegin(); it != todo.rend(); ++it) retry_.push_front(std::move(*it));
  while (retry_.size() > kMaxRetried) retry_.pop_front();
}

void PipelineClient::Follow(BusSource source, std::chrono::milliseconds every) {
  BusConfig now;
  std::string incarnation;
  // The incarnation the client connected to (the source was read just
  // before Open): a later change is a restart.
  if (source && !source(&now, &incarnation).ok()) incarnation.clear();
  std::lock_guard<std::mutex> lock(follow_mu_);
  source_ = std::move(source);
  incarnation_ = incarnation;
  every_ = every;
}

void PipelineClient::Maintain() {
  std::unique_lock<std::mutex> lock(follow_mu_);
  while (!stop_) {
    follow_cv_.wait_for(lock, every_);
    if (stop_) return;
    BusSource source = source_;
    const std::string known = incarnation_;
    const bool retry = !retry_.empty();
    lock.unlock();
    BusConfig bus;
    std::string incarnation;
    bool reconnected = false;
    if (source && source(&bus, &incarnation).ok() && !incarnation.empty() && incarnation != known) {
      Status s = Reconnect(bus);
      if (s.ok()) {
        reconnected = true;
        log::Info({"mcp", ""}) << "reconnected to the restarted deployment at " << bus.brokers << "\n";
      } else {
        log::Warn({"mcp", ""}) << "cannot reconnect to " << bus.brokers << " yet: " << s.ToString() << "\n";
      }
    }
    if (reconnected) {
      {
        std::lock_guard<std::mutex> relock(follow_mu_);
        incarnation_ = incarnation;
      }
      // Each waiting call sends its request again, now that the tails read
      // the new bus (ingest answers a finished one with its result).
      std::vector<std::function<void()>> again;
      {
        std::lock_guard<std::mutex> w(mu_);
        for (auto& [key, waiter] : waiters_) {
          std::lock_guard<std::mutex> wl(waiter->mu);
          if (waiter->on_reconnect) again.push_back(waiter->on_reconnect);
        }
      }
      for (auto& f : again) f();
    }
    if (retry || reconnected) RetryPending();
    lock.lock();
  }
}

Status PipelineClient::Reconnect(const BusConfig& fresh) {
  BusConfig bus = fresh;
  bus.topics = topics_;
  std::unique_ptr<Producer> producer;
  Status s = Producer::Open(bus, "", &producer);
  if (s.ok()) s = producer->Warm({topics_.requests(), topics_.approval_responses()}, kOpenTimeout);
  if (!s.ok()) return s;
  std::vector<std::string> topics;
  {
    std::lock_guard<std::mutex> lock(tails_mu_);
    for (const auto& [topic, t] : tails_) topics.push_back(topic);
  }
  // The new tails are open (at the new bus's end) before anything is sent
  // again, so no result slips past.
  std::map<std::string, std::unique_ptr<Tail>> opened;
  for (const std::string& topic : topics) {
    if (Status t = OpenTail(bus, topic, &opened[topic]); !t.ok()) return t;
  }
  std::map<std::string, std::unique_ptr<Tail>> old;
  {
    std::lock_guard<std::mutex> lock(tails_mu_);
    bus_ = bus;
    old.swap(tails_);
    for (auto& [topic, t] : opened) {
      Start(t.get());
      tails_[topic] = std::move(t);
    }
    // A topic first tailed while this ran: keep reading it until the next
    // Expect for its org opens it on the new bus.
    for (auto& [topic, t] : old) {
      if (!tails_.count(topic)) tails_[topic] = std::move(t);
    }
  }
  {
    std::lock_guard<std::mutex> lock(producer_mu_);
    producer_.swap(producer);
  }
  for (auto& [topic, t] : old) {
    if (!t) continue;
    t->stop = true;
    if (t->thread.joinable()) t->thread.join();
  }
  ++reconnects_;
  return Status::Ok();
}

std::optional<Json> PipelineClient::Waiter::pending() {
  std::lock_guard<std::mutex> lock(mu);
  return pending_;
}

void PipelineClient::Waiter::OnReconnect(std::function<void()> f) {
  std::lock_guard<std::mutex> lock(mu);
  on_reconnect = std::move(f);
}

std::optional<Json> PipelineClient::Waiter::Wait(std::chrono::steady_clock::time_point until,
                                                 const std::function<bool()>& stop,
                                                 const std::function<void()>& tick) {
  std::unique_lock<std::mutex> lock(mu);
  while (!result) {
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    if (stop) {
      // Unlocked: `stop` may ask pending().
      lock.unlock();
      const bool stopped = stop();
      lock.lock();
      if (stopped) return result;  // a result that came meanwhile still counts
    }
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
