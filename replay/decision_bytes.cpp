#include "replay/decision_bytes.h"

#include <cmath>
#include <string_view>

namespace tollgate::replay {
namespace {

// A JSON string as CanonicalBytes writes it. Printable ASCII without '"'
// or '\\' is copied; anything else is left to the canonical serialiser.
bool String(std::string_view s, std::string* out) {
  bool plain = true;
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x7F || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (plain) {
    out->push_back('"');
    out->append(s);
    out->push_back('"');
    return true;
  }
  std::string quoted;
  if (!CanonicalBytes(Json(std::string(s)), &quoted).ok()) return false;
  out->append(quoted);
  return true;
}

bool Strings(const std::vector<std::string>& v, std::string* out) {
  out->push_back('[');
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out->push_back(',');
    if (!String(v[i], out)) return false;
  }
  out->push_back(']');
  return true;
}

// reservation.usd as ToJson() makes it (a double) and CanonicalBytes writes
// it; the last one is kept, since a session's reservations repeat.
bool Usd(int64_t micros, std::string* out) {
  thread_local int64_t last = -1;
  thread_local std::string text;
  if (micros != last || micros < 0) {
    const double usd = static_cast<double>(micros) / 1e6;
    if (!std::isfinite(usd) || !CanonicalBytes(Json(usd), &text).ok()) return false;
    last = micros;
  }
  out->append(text);
  return true;
}

}  // namespace

bool ComparedDecisionBytes(const Decision& d, std::string* out) {
  out->clear();
  bool ok = true;
  // Keys in byte order, as the canonical form sorts them; present exactly
  // when Decision::ToJson() writes them.
  out->push_back('{');
  if (d.verdict == "ask") {
    out->append("\"approval\":{\"approvers\":");
    ok = ok && Strings(d.approvers, out);
    out->append(",\"quorum\":").append(std::to_string(d.quorum));
    out->append(",\"timeout_s\":").append(std::to_string(d.timeout_s));
    out->append("},");
  }
  out->append("\"danger_level\":");
  ok = ok && String(DangerName(d.danger), out);
  if (!d.error_code.empty()) {
    out->append(",\"error_code\":");
    ok = ok && String(d.error_code, out);
  }
  if (d.has_history) {
    const DecisionHistory& h = d.history;
    out->append(",\"history\":{\"calls\":").append(std::to_string(h.calls));
    out->append(",\"confidentiality\":\"").append(ConfidentialityName(h.confidentiality));
    out->append("\",\"integrity\":\"").append(IntegrityName(h.integrity)).append("\"");
    if (!h.rule.empty()) {
      out->append(",\"matched\":[");
      for (size_t i = 0; i < h.matched.size(); ++i) {
        if (i > 0) out->push_back(',');
        out->append(std::to_string(h.matched[i]));
      }
      out->append("],\"rule\":");
      ok = ok && String(h.rule, out);
    }
    out->append(",\"upto\":").append(std::to_string(h.upto)).push_back('}');
  }
  out->append(",\"invocation\":");
  ok = ok && String(d.invocation, out);
  if (!d.notify.empty()) {
    out->append(",\"notify\":");
    ok = ok && Strings(d.notify, out);
  }
  out->append(",\"policy_version\":");
  ok = ok && String(d.policy_version, out);
  out->append(d.read_only ? ",\"read_only\":true" : ",\"read_only\":false");
  out->append(",\"reason\":");
  ok = ok && String(d.reason, out);
  if (d.has_reservation) {
    out->append(",\"reservation\":{\"budgets\":");
    ok = ok && Strings(d.budgets, out);
    out->append(",\"received_at\":");
    ok = ok && String(d.received_at, out);
    out->append(",\"usd\":");
    ok = ok && Usd(d.reserve_micros, out);
    out->push_back('}');
  }
  out->append(",\"rule\":");
  ok = ok && String(d.rule, out);
  out->append(",\"verdict\":");
  ok = ok && String(d.verdict, out);
  out->push_back('}');
  return ok;
}

bool HistoryUpto(std::string_view bytes, uint64_t* upto) {
  // Canonical form: "history" is a top-level key and "upto" its last one;
  // nothing before it in the object holds an unescaped "upto" key (its
  // rule name is a quoted string, and a quote inside is escaped).
  const size_t h = bytes.find("\"history\":{");
  if (h == std::string_view::npos) return false;
  const size_t u = bytes.find("\"upto\":", h);
  if (u == std::string_view::npos) return false;
  uint64_t v = 0;
  size_t i = u + 7;
  if (i >= bytes.size() || bytes[i] < '0' || bytes[i] > '9') return false;
  for (; i < bytes.size() && bytes[i] >= '0' && bytes[i] <= '9'; ++i) v = v * 10 + (bytes[i] - '0');
  *upto = v;
  return true;
}

}  // namespace tollgate::replay
