#include "core/event.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <initializer_list>

#include "core/sha256.h"

namespace tollgate {

bool IsKnownEventType(std::string_view type) {
  for (auto t : kEventTypes) {
    if (t == type) return true;
  }
  return false;
}

Json Event::BodyJson() const {
  Json j = Json::object();
  j["seq"] = seq;
  j["id"] = id;
  j["type"] = type;
  j["time"] = FormatTime(time_us);
  j["org_id"] = org_id;
  j["agent_id"] = agent_id;
  j["session_id"] = session_id;
  j["request_id"] = request_id;
  j["tool"] = tool;
  j["data"] = data;
  if (prev_in_request) j["seq_prev_request"] = *prev_in_request;
  if (prev_in_session) j["seq_prev_session"] = *prev_in_session;
  return j;
}

Json Event::RecordJson() const {
  Json j = BodyJson();
  j["prev_hash"] = prev_hash;
  j["hash"] = hash;
  return j;
}

Json WithoutProvenance(Json data) {
  if (data.is_object()) {
    data.erase("source");
    data.erase("traceparent");
  }
  return data;
}

namespace {

Status CheckIdField(const char* name, const std::string& v, bool required) {
  if (required && v.empty()) {
    return Status::Error(errc::kInvalidEvent, std::string("field '") + name + "' is required");
  }
  if (v.size() > kMaxIdBytes) {
    return Status::Error(errc::kInvalidEvent, std::string("field '") + name + "' is " +
                                                  std::to_string(v.size()) + " bytes, limit " +
                                                  std::to_string(kMaxIdBytes));
  }
  for (unsigned char c : v) {
    if (c < 0x20 || c == 0x7f) {
      return Status::Error(errc::kInvalidEvent,
                           std::string("field '") + name + "' contains a control character");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateEnvelope(const Event& e) {
  if (!IsKnownEventType(e.type)) {
    if (e.type.empty()) return Status::Error(errc::kInvalidEvent, "field 'type' is required");
    return Status::Error(errc::kUnknownEventType, "unknown event type '" + e.type.substr(0, 64) + "'");
  }
  const bool needs_request = e.type != ev::kPolicyUpdated && e.type != ev::kToolsAvailable &&
                             e.type != ev::kPolicyRefused && e.type != ev::kCheckpointSigned;
  Status s;
  if (!(s = CheckIdField("id", e.id, true)).ok()) return s;
  if (!(s = CheckIdField("org_id", e.org_id, true)).ok()) return s;
  if (!(s = CheckIdField("agent_id", e.agent_id, needs_request)).ok()) return s;
  if (!(s = CheckIdField("session_id", e.session_id, needs_request)).ok()) return s;
  if (!(s = CheckIdField("request_id", e.request_id, needs_request)).ok()) return s;
  if (!(s = CheckIdField("tool", e.tool, false)).ok()) return s;
  if (e.time_us <= 0) return Status::Error(errc::kInvalidEvent, "field 'time' must be after 1970");
  if (!e.data.is_object()) return Status::Error(errc::kInvalidEvent, "field 'data' must be an object");
  // A link names an earlier event of the same request or session.
  if (e.prev_in_request && (e.request_id.empty() || (e.seq != 0 && *e.prev_in_request >= e.seq)))
    return Status::Error(errc::kInvalidEvent, "field 'seq_prev_request' does not name an earlier event");
  if (e.prev_in_session && (e.session_id.empty() || (e.seq != 0 && *e.prev_in_session >= e.seq)))
    return Status::Error(errc::kInvalidEvent, "field 'seq_prev_session' does not name an earlier event");
  return Status::Ok();
}

namespace {

Status ReadString(const Json& j, const char* name, std::string* out) {
  auto it = j.find(name);
  if (it == j.end()) return Status::Ok();
  if (!it->is_string()) {
    return Status::Error(errc::kInvalidEvent, std::string("field '") + name + "' must be a string");
  }
  *out = it->get<std::string>();
  return Status::Ok();
}

}  // namespace

Status EventFromJson(const Json& j, Event* out) {
  if (!j.is_object()) return Status::Error(errc::kInvalidEvent, "an event must be a JSON object");
  static const char* kKnown[] = {
      "seq",        "id",   "type", "time",      "org_id", "agent_id",         "session_id",
      "request_id", "tool", "data", "prev_hash", "hash",   "seq_prev_request", "seq_prev_session"};
  for (const auto& [key, _] : j.items()) {
    bool known = false;
    for (const char* k : kKnown) known = known || key == k;
    if (!known)
      return Status::Error(errc::kInvalidEvent, "unknown envelope field '" + key.substr(0, 64) + "'");
  }
  Event e;
  Status s;
  if (!(s = ReadString(j, "id", &e.id)).ok()) return s;
  if (!(s = ReadString(j, "type", &e.type)).ok()) return s;
  if (!(s = ReadString(j, "org_id", &e.org_id)).ok()) return s;
  if (!(s = ReadString(j, "agent_id", &e.agent_id)).ok()) return s;
  if (!(s = ReadString(j, "session_id", &e.session_id)).ok()) return s;
  if (!(s = ReadString(j, "request_id", &e.request_id)).ok()) return s;
  if (!(s = ReadString(j, "tool", &e.tool)).ok()) return s;
  if (!(s = ReadString(j, "prev_hash", &e.prev_hash)).ok()) return s;
  if (!(s = ReadString(j, "hash", &e.hash)).ok()) return s;
  std::string time;
  if (!(s = ReadString(j, "time", &time)).ok()) return s;
  if (time.empty()) return Status::Error(errc::kInvalidEvent, "field 'time' is required");
  if (!ParseTime(time, &e.time_us)) {
    return Status::Error(errc::kInvalidEvent, "field 'time' is not an RFC 3339 timestamp");
  }
  if (auto it = j.find("seq"); it != j.end()) {
    if (!it->is_number_unsigned()) {
      return Status::Error(errc::kInvalidEvent, "field 'seq' must be a positive integer");
    }
    e.seq = it->get<uint64_t>();
  }
  for (auto [name, link] : {std::pair{"seq_prev_request", &e.prev_in_request},
                            std::pair{"seq_prev_session", &e.prev_in_session}}) {
    auto it = j.find(name);
    if (it == j.end()) continue;
    if (!it->is_number_unsigned())
      return Status::Error(errc::kInvalidEvent,
                           std::string("field '") + name + "' must be an unsigned integer");
    *link = it->get<uint64_t>();
  }
  auto data = j.find("data");
  if (data == j.end()) return Status::Error(errc::kInvalidEvent, "field 'data' is required");
  e.data = *data;
  if (!(s = ValidateEnvelope(e)).ok()) return s;
  *out = std::move(e);
  return Status::Ok();
}

Status EventFromText(std::string_view text, Event* out) {
  Json j;
  Status s = ParseJson(text, &j);
  if (!s.ok()) return s;
  return EventFromJson(j, out);
}

Status EncodeEventBody(const Event& e, size_t max_bytes, std::string* out) {
  EventBodyParts parts;
  Status s = SplitEventBody(e, SIZE_MAX - 64, &parts);
  if (!s.ok()) return s;
  *out = parts.Join(e.seq);
  if (out->size() > max_bytes) {
    return Status::Error(errc::kEventTooLarge, "event is " + std::to_string(out->size()) + " bytes, limit " +
                                                   std::to_string(max_bytes));
  }
  return Status::Ok();
}

namespace {

// Appends `,"key":` + the canonical JSON of string `v` (exactly what
// CanonicalBytes gives, without building a Json for plain ASCII).
Status AppendStringField(std::string* out, std::string_view key, const std::string& v, bool first = false) {
  if (!first) out->push_back(',');
  out->push_back('"');
  out->append(key);
  out->append("\":");
  bool plain = true;
  for (unsigned char c : v) plain = plain && c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  if (plain) {
    out->push_back('"');
    out->append(v);
    out->push_back('"');
    return Status::Ok();
  }
  std::string quoted;
  Status s = CanonicalBytes(Json(v), &quoted);
  if (s.ok()) out->append(quoted);
  return s;
}

}  // namespace

Status SplitEventBody(const Event& e, size_t max_bytes, EventBodyParts* out) {
  Status s = ValidateEnvelope(e);
  if (!s.ok()) return s;
  // The body's keys in canonical (sorted) order, written field by field so
  // that data is serialised in place rather than copied into a new tree.
  std::string data;
  if (!(s = CanonicalBytes(e.data, &data)).ok()) return s;
  std::string& h = out->head;
  h.clear();
  h.reserve(data.size() + 256);
  h.push_back('{');
  if (!(s = AppendStringField(&h, "agent_id", e.agent_id, /*first=*/true)).ok()) return s;
  h.append(",\"data\":").append(data);
  if (!(s = AppendStringField(&h, "id", e.id)).ok()) return s;
  if (!(s = AppendStringField(&h, "org_id", e.org_id)).ok()) return s;
  if (!(s = AppendStringField(&h, "request_id", e.request_id)).ok()) return s;
  h.append(",\"seq\":");
  out->links = LinksText(e.prev_in_request, e.prev_in_session);
  std::string& t = out->tail;
  t.clear();
  if (!(s = AppendStringField(&t, "session_id", e.session_id)).ok()) return s;
  if (!(s = AppendStringField(&t, "time", FormatTime(e.time_us))).ok()) return s;
  if (!(s = AppendStringField(&t, "tool", e.tool)).ok()) return s;
  if (!(s = AppendStringField(&t, "type", e.type)).ok()) return s;
  t.push_back('}');
  // Room for a 20-digit seq and the log's links (LinksText of two).
  const size_t size = out->head.size() + out->tail.size() + 20 + 80;
  if (size > max_bytes) {
    return Status::Error(errc::kEventTooLarge,
                         "event is " + std::to_string(size) + " bytes, limit " + std::to_string(max_bytes));
  }
  return Status::Ok();
}

std::string LinksText(std::optional<uint64_t> prev_in_request, std::optional<uint64_t> prev_in_session) {
  std::string out;
  if (prev_in_request) out.append(",\"seq_prev_request\":").append(std::to_string(*prev_in_request));
  if (prev_in_session) out.append(",\"seq_prev_session\":").append(std::to_string(*prev_in_session));
  return out;
}

namespace {

// The first 32 hex digits of SHA-256 over the parts, each followed by NUL
// but the last (ids are free of NUL, so the join is unambiguous).
std::string IdOf(std::initializer_list<std::string_view> parts) {
  std::string input;
  for (std::string_view p : parts) {
    if (!input.empty()) input.push_back('\0');
    input.append(p);
  }
  return Sha256Hex(input).substr(0, 32);
}

}  // namespace

std::string MakeEventId(std::string_view type, std::string_view request_id, std::string_view discriminator) {
  return IdOf({"tollgate.event.v1", type, request_id, discriminator});
}

std::string MakeRequestEventId(std::string_view org_id, std::string_view type, std::string_view request_id,
                               std::string_view discriminator) {
  return IdOf({"tollgate.event.v2", org_id, type, request_id, discriminator});
}

std::string RequestKey(std::string_view org_id, std::string_view request_id) {
  std::string k(org_id);
  k.push_back('\0');
  k.append(request_id);
  return k;
}

std::string FormatTime(int64_t time_us) {
  int64_t secs = time_us / 1000000;
  int64_t frac = time_us % 1000000;
  if (frac < 0) {
    frac += 1000000;
    secs -= 1;
  }
  std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  const int year = tm.tm_year + 1900;
  if (year >= 0 && year <= 9999) {
    // What the snprintf below writes, without its format parsing (this is
    // on every decision's path).
    char out[27];
    auto put = [&out](int at, long long v, int n) {
      for (int i = n - 1; i >= 0; --i, v /= 10) out[at + i] = static_cast<char>('0' + v % 10);
    };
    put(0, year, 4);
    out[4] = '-';
    put(5, tm.tm_mon + 1, 2);
    out[7] = '-';
    put(8, tm.tm_mday, 2);
    out[10] = 'T';
    put(11, tm.tm_hour, 2);
    out[13] = ':';
    put(14, tm.tm_min, 2);
    out[16] = ':';
    put(17, tm.tm_sec, 2);
    out[19] = '.';
    put(20, frac, 6);
    out[26] = 'Z';
    return std::string(out, sizeof out);
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(frac));
  return buf;
}

bool ParseTime(std::string_view s, int64_t* time_us) {
  // YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|+HH:MM|-HH:MM)
  auto digits = [&](size_t pos, size_t n, int* v) {
    if (pos + n > s.size()) return false;
    int r = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      r = r * 10 + (s[i] - '0');
    }
    *v = r;
    return true;
  };
  int Y, M, D, h, m, sec;
  if (!digits(0, 4, &Y) || s.size() < 20 || s[4] != '-' || !digits(5, 2, &M) || s[7] != '-' ||
      !digits(8, 2, &D) || (s[10] != 'T' && s[10] != 't') || !digits(11, 2, &h) || s[13] != ':' ||
      !digits(14, 2, &m) || s[16] != ':' || !digits(17, 2, &sec)) {
    return false;
  }
  if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60) return false;
  size_t pos = 19;
  int64_t frac_us = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    size_t start = pos;
    int64_t scale = 100000;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (pos - start >= 9) return false;
      frac_us += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return false;
  }
  int64_t offset_s = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh, om;
    if (!digits(pos + 1, 2, &oh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !digits(pos + 4, 2, &om)) {
      return false;
    }
    offset_s = (oh * 3600 + om * 60) * (s[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return false;
  }
  if (pos != s.size()) return false;
  // Days from civil (Howard Hinnant's algorithm).
  int y = Y - (M <= 2);
  int era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = static_cast<unsigned>(y - era * 400);
  unsigned doy = (153 * (M + (M > 2 ? -3 : 9)) + 2) / 5 + D - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  int64_t days = static_cast<int64_t>(era) * 146097 + static_cast<int64_t>(doe) - 719468;
  int64_t secs = days * 86400 + h * 3600 + m * 60 + sec - offset_s;
  *time_us = secs * 1000000 + frac_us;
  return true;
}

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

// A cursor over canonical body bytes; every step checks bounds.
struct BodyScanner {
  std::string_view text;
  size_t pos = 0;

  bool Literal(std::string_view lit) {
    if (text.substr(pos, lit.size()) != lit) return false;
    pos += lit.size();
    return true;
  }
  // "..." without escapes or control bytes; the view excludes the quotes.
  bool PlainString(std::string_view* out) {
    if (pos >= text.size() || text[pos] != '"') return false;
    const size_t start = ++pos;
    while (pos < text.size()) {
      const unsigned char c = static_cast<unsigned char>(text[pos]);
      if (c == '"') {
        *out = text.substr(start, pos - start);
        ++pos;
        return true;
      }
      if (c == '\\' || c < 0x20) return false;
      ++pos;
    }
    return false;
  }
  bool Unsigned(uint64_t* out) {
    const size_t start = pos;
    uint64_t v = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (pos - start >= 19) return false;  // beyond any seq we write
      v = v * 10 + static_cast<uint64_t>(text[pos] - '0');
      ++pos;
    }
    if (pos == start || (text[start] == '0' && pos - start > 1)) return false;
    *out = v;
    return true;
  }
  // An object or array, skipped by bracket matching (strings honoured).
  bool Nested(std::string_view* out) {
    const size_t start = pos;
    if (pos >= text.size() || (text[pos] != '{' && text[pos] != '[')) return false;
    int depth = 0;
    bool in_string = false;
    for (; pos < text.size(); ++pos) {
      const char c = text[pos];
      if (in_string) {
        if (c == '\\')
          ++pos;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) {
          ++pos;
          *out = text.substr(start, pos - start);
          return true;
        }
      }
    }
    return false;
  }
};

}  // namespace

bool ScanEnvelope(std::string_view body, EnvelopeView* v) {
  BodyScanner s{body};
  auto str = [&](std::string_view key, std::string_view* out, bool last = false) {
    return s.Literal(key) && s.PlainString(out) && s.Literal(last ? "}" : ",");
  };
  if (!s.Literal("{")) return false;
  if (!str("\"agent_id\":", &v->agent_id)) return false;
  if (!s.Literal("\"data\":") || !s.Nested(&v->data) || v->data.front() != '{' || !s.Literal(","))
    return false;
  v->id_key_at = s.pos;
  if (!str("\"id\":", &v->id) || !str("\"org_id\":", &v->org_id)) return false;
  v->request_id_key_at = s.pos;
  if (!str("\"request_id\":", &v->request_id)) return false;
  if (!s.Literal("\"seq\":") || !s.Unsigned(&v->seq) || !s.Literal(",")) return false;
  for (auto [key, link] : {std::pair{"\"seq_prev_request\":", &v->prev_in_request},
                           std::pair{"\"seq_prev_session\":", &v->prev_in_session}}) {
    uint64_t n = 0;
    if (!s.Literal(key)) continue;
    if (!s.Unsigned(&n) || !s.Literal(",")) return false;
    *link = n;
  }
  if (!str("\"session_id\":", &v->session_id) || !str("\"time\":", &v->time) || !str("\"tool\":", &v->tool) ||
      !str("\"type\":", &v->type, /*last=*/true)) {
    return false;
  }
  return s.pos == body.size();
}

std::string RecordText(std::string_view body, const EnvelopeView& v, std::string_view prev_hash_hex,
                       std::string_view hash_hex) {
  // Sorted keys: ... data, "hash", id, org_id, "prev_hash", request_id, ...
  std::string out;
  out.reserve(body.size() + prev_hash_hex.size() + hash_hex.size() + 32);
  out.append(body.substr(0, v.id_key_at));
  out.append("\"hash\":\"").append(hash_hex).append("\",");
  out.append(body.substr(v.id_key_at, v.request_id_key_at - v.id_key_at));
  out.append("\"prev_hash\":\"").append(prev_hash_hex).append("\",");
  out.append(body.substr(v.request_id_key_at));
  return out;
}

}  // namespace tollgate
