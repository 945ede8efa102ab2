#include "replay/from_log.h"

#include <utility>

namespace tollgate::replay {

Status ReadTargetEvents(const LogStore& store, const Target& target, std::vector<Event>* out) {
  out->clear();
  Status s = !target.session_id.empty() ? ReadSession(store, target.session_id, out)
                                        : ReadAgent(store, target.agent_id, target.since_us, target.until_us, out);
  if (!s.ok()) return s;
  if (target.org_id.empty()) return Status::Ok();
  std::vector<Event> kept;
  for (Event& e : *out) {
    if (target.Matches(e)) kept.push_back(std::move(e));
  }
  *out = std::move(kept);
  // Another org's events are as absent as none at all.
  if (out->empty()) return Status::Error(errc::kNotFound, "no event of this target in org '" + target.org_id + "'");
  return Status::Ok();
}

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
  out->problems = CheckSessionChain(
      events, [&store](uint64_t seq, ChainLink* l) { return ReadLink(store, seq, l); });
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

}  // namespace tollgate::replay
