#include "deploy/scheduler.h"

#include <condition_variable>
#include <mutex>
#include <queue>
#include <set>

#include "audit/audit_query.h"
#include "core/auth.h"
#include "core/log.h"
#include "core/messages.h"
#include "core/request_state.h"
#include "core/schedules.h"

namespace tollgate {

struct Scheduler::State {
  std::mutex mu;
  std::condition_variable cv;
  ScheduleBook book;
  using Due = std::pair<int64_t, std::string>;  // (due_us, schedule_id)
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> heap;
  bool loading = true;         // the start's fold runs: listener events wait
  std::vector<Event> backlog;  // what the listener saw meanwhile
  bool stop = false;

  // Requires mu. A create is queued; every entry is trimmed (the fire reads
  // the create's request from the log).
  void ApplyLocked(const Event& e) {
    if (!book.Apply(e)) return;
    std::string id = ScheduleOfFireRequest(e.request_id);
    if (e.type == ev::kExecutionCompleted) {  // Apply took it: result.data is an object
      id = e.data.at("result").at("data").value("schedule_id", "");
    }
    const ScheduleEntry* s = book.Find(id);
    if (s == nullptr) return;
    if (s->state == ScheduleEntry::State::kScheduled) heap.emplace(s->due_us, id);
    book.Trim(id);
    cv.notify_all();
  }
};

namespace {

// Only these events can change a schedule: the listener skips the rest cheaply.
bool Relevant(const Event& e) {
  if (e.type == ev::kExecutionCompleted) return e.tool == kScheduleTool;
  return (e.type == ev::kRequestReceived || e.type == ev::kRequestRejected) &&
         !ScheduleOfFireRequest(e.request_id).empty();
}

}  // namespace

Status Scheduler::Start(const LogStore& store, LogSink& sink, SchedulerOptions options,
                        std::unique_ptr<Scheduler>* out) {
  if (!options.signer) return Status::Error("E_UNAVAILABLE", "the scheduler has no service key to sign with");
  std::unique_ptr<Scheduler> p(new Scheduler());
  p->store_ = &store;
  p->options_ = std::move(options);
  p->state_ = std::make_shared<State>();
  Status s = Producer::Open(p->options_.bus, "", &p->producer_);
  if (!s.ok()) return s;
  // The listener first, so nothing appended during the fold is missed; it
  // holds the state, not the scheduler (listeners live as long as the sink).
  sink.AddListener([st = p->state_](const std::vector<Event>& events) {
    std::lock_guard<std::mutex> lock(st->mu);
    for (const Event& e : events) {
      if (!Relevant(e)) continue;
      if (st->loading) {
        st->backlog.push_back(e);
      } else {
        st->ApplyLocked(e);
      }
    }
  });
  AuditQuery q;
  q.tool = kScheduleTool;
  q.types = {ev::kExecutionCompleted};
  {
    std::lock_guard<std::mutex> lock(p->state_->mu);
    s = ForEachEvent(store, q, [&](Event& e) { p->state_->ApplyLocked(e); });
    if (!s.ok()) return s;
    for (const Event& e : p->state_->backlog) p->state_->ApplyLocked(e);
    p->state_->backlog.clear();
    p->state_->loading = false;
  }
  log::Info({"scheduler"}) << p->pending() << " schedules pending\n";
  p->thread_ = std::thread([raw = p.get()] { raw->Loop(); });
  *out = std::move(p);
  return Status::Ok();
}

Scheduler::~Scheduler() {
  if (state_) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
    state_->cv.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

size_t Scheduler::pending() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  size_t n = 0;
  // The heap may hold an id twice (a resend): count the book.
  std::set<std::string> ids;
  auto heap = state_->heap;
  while (!heap.empty()) {
    const ScheduleEntry* s = state_->book.Find(heap.top().second);
    if (s != nullptr && s->state == ScheduleEntry::State::kScheduled && ids.insert(s->schedule_id).second)
      ++n;
    heap.pop();
  }
  return n;
}

uint64_t Scheduler::published() const { return published_.load(); }

void Scheduler::Loop() {
  State& st = *state_;
  std::unique_lock<std::mutex> lock(st.mu);
  while (!st.stop) {
    if (st.heap.empty()) {
      st.cv.wait(lock);
      continue;
    }
    const int64_t now = NowMicros();
    const auto [due, id] = st.heap.top();
    if (due > now) {
      st.cv.wait_for(lock, std::chrono::microseconds(std::min<int64_t>(due - now, 60'000'000)));
      continue;
    }
    st.heap.pop();
    const ScheduleEntry* s = st.book.Find(id);
    if (s == nullptr || s->state != ScheduleEntry::State::kScheduled) continue;  // cancelled or fired
    lock.unlock();
    Status error;
    const bool sent = Fire(id, &error);
    lock.lock();
    if (!error.ok())
      log::Warn({"scheduler", id}) << "could not fire " << id << ": " << error.ToString() << "\n";
    // Sent (or failed): look again later; the log will show it fired. Not
    // sent: it has fired.
    if (sent || !error.ok()) {
      const auto later = std::chrono::duration_cast<std::chrono::microseconds>(options_.resend_after);
      st.heap.emplace(NowMicros() + later.count(), id);
    }
  }
}

bool Scheduler::Fire(const std::string& schedule_id, Status* error) {
  std::string org, create_rid;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    const ScheduleEntry* s = state_->book.Find(schedule_id);
    if (s == nullptr || s->state != ScheduleEntry::State::kScheduled) return false;
    org = s->org_id;
    create_rid = s->create_request_id;
  }
  StoreLogView view(*store_);
  const std::string fire_rid = FireRequestIdOf(schedule_id);
  std::vector<Event> fired;
  *error = view.EventsOfRequest(org, fire_rid, &fired);
  if (!error->ok()) return false;
  {
    // Received (or rejected for good) before: a restart, a resend. Fold
    // it and send nothing.
    std::lock_guard<std::mutex> lock(state_->mu);
    for (const Event& e : fired) state_->ApplyLocked(e);
    const ScheduleEntry* s = state_->book.Find(schedule_id);
    if (s == nullptr || s->state != ScheduleEntry::State::kScheduled) return false;
  }
  std::vector<Event> create;
  *error = view.EventsOfRequest(org, create_rid, &create);
  if (!error->ok()) return false;
  RequestState rs = Summarize(create);
  if (rs.received == nullptr) {
    *error = Status::Error(errc::kNotInLog, "the log has no request " + create_rid);
    return false;
  }
  const Json call = rs.received->data.value("request", Json::object()).value("args", Json::object());
  Json req{{"request_id", fire_rid},
           {"org_id", org},
           {"agent_id", rs.received->agent_id},
           {"session_id", rs.received->session_id},
           {"tool", call.value("tool", "")},
           {"args", call.value("args", Json::object())},
           {"metadata", {{"scheduled_by", schedule_id}, {"schedule_request_id", create_rid}}}};
  if (call.contains("tool_action")) req["action"] = call["tool_action"];
  Message m;
  m.topic = options_.bus.topics.requests();
  m.key = rs.received->agent_id;
  m.value = req.dump();
  m.headers[kHeaderAuth] =
      SignRequestOnBehalf(*options_.signer, org, m.key, fire_rid, m.value, NowMicros() / 1'000'000);
  *error = producer_->Send(m);
  if (error->ok()) *error = producer_->Flush(std::chrono::seconds(10));
  if (!error->ok()) return false;
  published_.fetch_add(1);
  log::Info({"scheduler", fire_rid}) << "fired " << schedule_id << " as " << fire_rid << "\n";
  return true;
}

}  // namespace tollgate
