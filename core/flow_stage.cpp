#include "core/flow_stage.h"

#include "core/redact.h"
#include "core/request_state.h"
#include "core/sha256.h"
#include "core/unproven.h"

namespace tollgate {

StageResult RejectMalformedFlow(const std::string& stage, const Topics& topics, const Message& in,
                                const StageContext& ctx, const std::string& why, const char* code,
                                const Json& claimed) {
  UnprovenRefusal refusal{stage, code, stage + " refused its input: " + why};
  if (claimed.is_object()) refusal.data["claimed"] = claimed;
  return RefuseUnproven(topics, in, ctx, refusal);
}

namespace {

// What a refused flow claimed to be, for the auditor (ids only, no args).
Json Claimed(const Flow& flow) {
  Json c = Json::object();
  for (const char* k : {"request_id", "org_id", "agent_id", "session_id", "tool"}) {
    auto it = flow.request.find(k);
    if (it != flow.request.end() && it->is_string() &&
        it->get_ref<const std::string&>().size() <= kMaxIdBytes) {
      c[k] = *it;
    }
  }
  return c;
}

// Empty when `flow` is what the log says of its request, else why not.
std::string CompareWithLog(const Flow& flow, const RequestState& st, const char** code) {
  *code = errc::kFlowMismatch;
  if (st.received == nullptr) {
    *code = errc::kNotInLog;
    return "the log has no request.received for request " + flow.request_id() + " of org " +
           flow.request.value("org_id", "");
  }
  const Json& data = st.received->data;
  std::string canon;
  if (!CanonicalBytes(flow.request, &canon).ok() || Sha256Hex(canon) != data.value("content_hash", "")) {
    return "the request differs from the one ingest received";
  }
  if (flow.received_at != data.value("received_at", "") || flow.args_hash != data.value("args_hash", "")) {
    return "received_at or args_hash differs from the log's";
  }
  if (!flow.decision.is_null()) {
    if (st.decision == nullptr) {
      *code = errc::kNotInLog;
      return "the log has no decision for request " + flow.request_id();
    }
    // The flow carries what decide decided (secrets intact) or, re-emitted
    // from the log, its redacted form (docs/redaction.md). The redacted one
    // is checked by the hash decide logged of the unredacted bytes: the
    // redaction rules in force may have changed since, so re-redacting the
    // flow's copy would not reliably give the logged bytes.
    const Json logged = WithoutProvenance(st.decision->data);
    std::string a, b;
    if (!CanonicalBytes(flow.decision, &a).ok() || !CanonicalBytes(logged, &b).ok()) {
      return "the decision differs from the one decide made";
    }
    if (a != b) {
      const std::string unredacted = logged.value("unredacted_sha256", "");
      const Json bare = DecisionFromLog(logged);
      std::string c;
      const bool same =
          (!unredacted.empty() && Sha256Hex(a) == unredacted) || (CanonicalBytes(bare, &c).ok() && a == c);
      if (!same) return "the decision differs from the one decide made";
    }
  }
  return "";
}

}  // namespace

bool ReadFlow(const std::string& stage, const Topics& topics, const Message& in, const StageContext& ctx,
              const LogView& log, FlowInput* out, StageResult* rejected) {
  Flow* flow = &out->flow;
  Json j;
  if (!ParseJson(in.value, &j).ok() || !Flow::FromJson(j, flow)) {
    *rejected = RejectMalformedFlow(stage, topics, in, ctx, "not a flow message");
    return false;
  }
  for (const char* k : {"request_id", "org_id", "agent_id", "session_id"}) {
    const std::string v = flow->request.value(k, "");
    if (v.empty() || v.size() > kMaxIdBytes) {
      *rejected = RejectMalformedFlow(stage, topics, in, ctx, std::string("bad ") + k);
      return false;
    }
  }
  Status s = log.EventsOfRequest(flow->request.value("org_id", ""), flow->request_id(), &out->history);
  if (!s.ok()) {
    rejected->error = s;  // infrastructure, not the message: retried
    return false;
  }
  out->state = Summarize(out->history);
  const char* code = errc::kFlowMismatch;
  const std::string why = CompareWithLog(*flow, out->state, &code);
  if (!why.empty()) {
    *rejected = RejectMalformedFlow(stage, topics, in, ctx, why, code, Claimed(*flow));
    return false;
  }
  return true;
}

Json LoggedDecision(const Json& decision, const Redactor& redactor) {
  Json logged = decision;
  const std::vector<std::string> redacted = RedactDecision(logged, redactor);
  if (redacted.empty()) return logged;
  std::string bytes;
  (void)CanonicalBytes(decision, &bytes);
  logged["redacted"] = redacted;
  logged["unredacted_sha256"] = Sha256Hex(bytes);
  return logged;
}

void RedactResult(Json* result, const Redactor& redactor) {
  if (!result->is_object()) return;
  auto d = result->find("decision");
  if (d != result->end() && d->is_object()) {
    *d = DecisionFromLog(std::move(*d));
    RedactDecision(*d, redactor);
  }
  auto t = result->find("result");
  if (t != result->end()) redactor.Redact(*t);
}

Json DecisionFromLog(Json data) {
  data = WithoutProvenance(std::move(data));
  if (data.is_object()) {
    for (const char* k : {"redacted", "unredacted_sha256"}) data.erase(k);
  }
  return data;
}

Event FlowEvent(const Flow& flow, const std::string& type, int64_t time_us, Json data,
                const std::string& discriminator) {
  Event e;
  e.type = type;
  e.request_id = flow.request_id();
  e.org_id = flow.request.value("org_id", "");
  e.id = MakeRequestEventId(e.org_id, type, e.request_id, discriminator);
  e.time_us = time_us;
  e.agent_id = flow.request.value("agent_id", "");
  e.session_id = flow.request.value("session_id", "");
  e.tool = flow.request.value("tool", "");
  e.data = std::move(data);
  return e;
}

}  // namespace tollgate
