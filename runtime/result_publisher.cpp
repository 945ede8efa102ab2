#include "runtime/result_publisher.h"

#include "core/log.h"
#include "core/result_signature.h"

namespace tollgate {

Status ResultPublisher::Route(Message* m, const Json* parsed) {
  if (m->topic != bus_.topics.results()) return Status::Ok();
  Json own;
  if (parsed == nullptr || !parsed->is_object()) {
    (void)ParseJson(m->value, &own);
    parsed = &own;
  }
  const Json& v = *parsed;
  if (!v.is_object() || !v.contains("org_id") || !v["org_id"].is_string() || !SignResult(*gate_, m, &v)) {
    log::Warn({"results"}) << "a result on " << m->topic << " names no org; sent unsigned\n";
    return Status::Ok();
  }
  const std::string topic = bus_.topics.results_for(v["org_id"].get<std::string>());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ensured_.count(topic)) {
      Status s = EnsureTopic(bus_, topic, std::chrono::seconds(10));
      if (!s.ok()) return s;
      ensured_.insert(topic);
    }
  }
  m->topic = topic;
  return Status::Ok();
}

Status ResultPublisher::ExistingTopics(std::vector<std::string>* out) const {
  if (bus_.topics.shared_results) return Status::Ok();
  return ListTopics(bus_, bus_.topics.results() + ".", std::chrono::seconds(10), out);
}

}  // namespace tollgate
