#include "runtime/stage_host.h"

#include "core/log.h"

namespace tollgate {

Status StageHost::Restore(std::vector<std::unique_ptr<Stage>> stages, HostEnv env,
                          std::unique_ptr<StageHost>* out) {
  std::unique_ptr<StageHost> h(new StageHost());
  h->env_ = std::move(env);
  h->stages_ = std::move(stages);
  for (auto& stage : h->stages_) {
    Status s = stage->Restore(*h->env_.history);
    if (!s.ok()) return Status::Error(s.code(), stage->name() + ": restoring its state: " + s.message());
    h->env_.feed->Subscribe(stage.get());
  }
  *out = std::move(h);
  return Status::Ok();
}

Status StageHost::Run() {
  std::vector<std::unique_ptr<StageRunner>> runners;
  for (auto& stage : stages_) {
    auto runner = std::make_unique<StageRunner>(*stage, *env_.sink, *env_.view, env_.runner_options(*stage));
    Status s = runner->Start();
    if (!s.ok()) return s;
    runners.push_back(std::move(runner));
  }
  runners_ = std::move(runners);
  for (size_t i = 0; i < runners_.size(); ++i) {
    threads_.emplace_back([r = runners_[i].get(), name = stages_[i]->name()] {
      Status st = r->Run();
      if (!st.ok()) log::Error({name}) << "stopped: " << st.ToString() << "\n";
    });
  }
  return Status::Ok();
}

void StageHost::Stop() {
  for (auto& r : runners_) r->Stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

StageHost::~StageHost() {
  Stop();
  runners_.clear();
}

std::vector<std::pair<std::string, const StageRunner*>> StageHost::runners() const {
  std::vector<std::pair<std::string, const StageRunner*>> out;
  for (size_t i = 0; i < runners_.size(); ++i) out.emplace_back(stages_[i]->name(), runners_[i].get());
  return out;
}

uint64_t StageHost::retries() const {
  uint64_t n = 0;
  for (const auto& r : runners_) n += r->stats().retries.load();
  return n;
}

Json StageHost::stats() const {
  Json out = Json::object();
  for (size_t i = 0; i < runners_.size(); ++i) {
    const RunnerStats& st = runners_[i]->stats();
    out[stages_[i]->name()] = {{"messages", st.messages.load()},
                               {"batches", st.batches.load()},
                               {"events", st.events.load()},
                               {"outputs", st.outputs.load()},
                               {"retries", st.retries.load()},
                               {"process_us", st.process_us.load()},
                               {"append_us", st.append_us.load()},
                               {"publish_us", st.publish_us.load()},
                               {"publish_wait_us", st.publish_wait_us.load()},
                               {"pipelined", st.pipelined.load()},
                               {"deferred", st.deferred.load()},
                               {"already_committed", st.already_committed.load()}};
  }
  return out;
}

}  // namespace tollgate
