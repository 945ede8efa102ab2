#include "replay/from_log.h"

#include <utility>

#include "decide/policy_loader.h"

namespace tollgate::replay {

Status ReadTimeline(const LogStore& store, const Target& target, SessionTimeline* out) {
  if (target.session_id.empty()) return Status::Error(errc::kInvalidQuery, "a timeline needs a session id");
  std::vector<Event> events;
  Status s = ReadTargetEvents(store, target, &events);
  if (!s.ok()) return s;
  *out = BuildTimeline(target.session_id, std::move(events));
  return Status::Ok();
}

Json ChainReport::ToJson() const {
  Json pj = Json::array();
  for (const auto& p : problems) pj.push_back({{"seq", p.seq}, {"error", p.status.ToString()}});
  return {{"events", events}, {"ok", ok()}, {"problems", pj}};
}

Status CheckTargetChain(const LogStore& store, const Target& target, ChainReport* out) {
  std::vector<Event> events;
  Status s = ReadTargetEvents(store, target, &events);
  if (!s.ok()) return s;
  out->events = events.size();
  out->problems =
      CheckSessionChain(events, [&store](uint64_t seq, ChainLink* l) { return ReadLink(store, seq, l); });
  return Status::Ok();
}

Status RedecideTarget(const LogStore& store, const Target& target, const RedecideOptions& options,
                      RedecideReport* out) {
  Redecider fold(target, options);
  Status s = StreamDecisionInputs(store, target, [&fold](std::vector<DecisionInput>& chunk) {
    for (DecisionInput& in : chunk) fold.Fold(in);
  });
  if (!s.ok()) return s;
  *out = fold.Finish();
  return Status::Ok();
}

Status ParseCandidate(const std::string& text, const std::string& source, PolicyPtr* out) {
  return LoadPolicyYaml(text, source, out);
}

}  // namespace tollgate::replay
