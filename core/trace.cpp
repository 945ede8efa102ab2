#include "core/trace.h"

#include "core/sha256.h"
#include "core/stage.h"

namespace tollgate {
namespace {

// Lowercase hex, not all zeros when `nonzero`.
bool Hex(std::string_view s, bool nonzero) {
  bool any = false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    any = any || c != '0';
  }
  return any || !nonzero;
}

}  // namespace

bool IsValidTraceparent(std::string_view v) {
  // 2 + 1 + 32 + 1 + 16 + 1 + 2: the length check first bounds all work.
  if (v.size() != 55 || v[2] != '-' || v[35] != '-' || v[52] != '-') return false;
  return v.substr(0, 2) == "00" && Hex(v.substr(3, 32), true) && Hex(v.substr(36, 16), true) &&
         Hex(v.substr(53, 2), false);
}

std::string NewTraceparent(std::string_view org_id, std::string_view request_id) {
  const std::string h = ToHex(Sha256(
      {"tollgate.trace.v1", std::string_view("\0", 1), org_id, std::string_view("\0", 1), request_id}));
  std::string trace = h.substr(0, 32), span = h.substr(32, 16);
  // All zeros is invalid; a digest that starts so is not worth a retry loop.
  if (!Hex(trace, true)) trace[31] = '1';
  if (!Hex(span, true)) span[15] = '1';
  return "00-" + trace + "-" + span + "-01";
}

std::string TraceparentOf(const Message& m) {
  auto it = m.headers.find(kHeaderTraceparent);
  return it != m.headers.end() && IsValidTraceparent(it->second) ? it->second : std::string();
}

std::string TraceparentOf(const Event& e) {
  if (!e.data.is_object()) return "";
  auto it = e.data.find(kTraceField);
  if (it == e.data.end() || !it->is_string()) return "";
  const std::string& v = it->get_ref<const std::string&>();
  return IsValidTraceparent(v) ? v : std::string();
}

std::string RequestTraceparent(const std::vector<Event>& history) {
  for (const Event& e : history) {
    std::string tp = TraceparentOf(e);
    if (!tp.empty()) return tp;
  }
  return "";
}

void StampTraceparent(const std::string& tp, Message* m) {
  if (!tp.empty() && TraceparentOf(*m).empty()) m->headers[kHeaderTraceparent] = tp;
}

void StampTraceparent(const std::string& tp, Event* e) {
  if (!tp.empty() && e->data.is_object() && TraceparentOf(*e).empty()) e->data[kTraceField] = tp;
}

void StampTraceparent(const std::string& tp, StageResult* r) {
  if (tp.empty()) return;
  for (StageOutput& o : r->outputs) StampTraceparent(tp, &o.message);
  for (Event& e : r->events) {
    if (!e.request_id.empty()) StampTraceparent(tp, &e);
  }
}

}  // namespace tollgate
