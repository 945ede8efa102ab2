#include "audit/log_format.h"

#include <cstring>

#include "core/messages.h"

namespace tollgate::logfmt {

const char* CfName(int cf) {
  static const char* kNames[kNumCfs] = {"default",     "events",   "idx_session", "idx_agent",
                                        "idx_request", "idx_tool", "idx_org",     "idx_type",
                                        "idx_time",    "dedupe",   "meta",        "merkle"};
  return kNames[cf];
}

std::string EncodeSeq(uint64_t seq) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(seq & 0xff);
    seq >>= 8;
  }
  return out;
}

bool DecodeSeq(std::string_view in, uint64_t* seq) {
  if (in.size() != 8) return false;
  uint64_t v = 0;
  for (unsigned char c : in) v = v << 8 | c;
  *seq = v;
  return true;
}

std::string IndexPrefix(std::string_view value) {
  std::string key(value);
  key.push_back('\0');
  return key;
}

std::string OpenKey(std::string_view org_id, std::string_view request_id) {
  std::string key(kMetaOpenPrefix);
  key += org_id;
  key.push_back('\0');
  key += request_id;
  return key;
}

bool ParseOpenKey(std::string_view key, std::string* org_id, std::string* request_id) {
  if (!key.starts_with(kMetaOpenPrefix)) return false;
  key.remove_prefix(kMetaOpenPrefix.size());
  const size_t nul = key.find('\0');
  if (nul == std::string_view::npos) return false;
  *org_id = std::string(key.substr(0, nul));
  *request_id = std::string(key.substr(nul + 1));
  return !request_id->empty();
}

OpenOp OpenIndexOp(const Event& e) {
  if (e.request_id.empty()) return OpenOp::kNone;
  if (e.type == ev::kRequestReceived) return OpenOp::kOpen;
  if (e.type == ev::kExecutionCompleted || e.type == ev::kApprovalDenied || e.type == ev::kApprovalExpired) {
    return OpenOp::kClose;
  }
  if (e.type == ev::kDecisionMade) {
    auto v = e.data.find("verdict");
    return v != e.data.end() && v->is_string() && *v == "deny" ? OpenOp::kClose : OpenOp::kNone;
  }
  if (e.type == ev::kRequestRejected) {
    // After a request.received only the pipeline giving up ends it
    // (RequestState::rejected); other refusals turn away a copy.
    const Json* err = e.data.is_object() && e.data.contains("error") ? &e.data["error"] : nullptr;
    const std::string code = err != nullptr && err->is_object() ? err->value("code", "") : "";
    return code == errc::kRequestLost || code == errc::kOutputTooLarge ? OpenOp::kClose : OpenOp::kNone;
  }
  return OpenOp::kNone;
}

std::string IndexKey(std::string_view value, uint64_t seq) {
  std::string key = IndexPrefix(value);
  key += EncodeSeq(seq);
  return key;
}

bool ParseIndexKey(std::string_view key, std::string_view* value, uint64_t* seq) {
  if (key.size() < 9 || key[key.size() - 9] != '\0') return false;
  std::string_view v = key.substr(0, key.size() - 9);
  if (v.find('\0') != std::string_view::npos) return false;
  *value = v;
  return DecodeSeq(key.substr(key.size() - 8), seq);
}

std::string TimeKey(int64_t time_us, uint64_t seq) {
  return EncodeSeq(static_cast<uint64_t>(time_us) ^ (uint64_t{1} << 63)) + EncodeSeq(seq);
}

bool ParseTimeKey(std::string_view key, int64_t* time_us, uint64_t* seq) {
  uint64_t t;
  if (key.size() != 16 || !DecodeSeq(key.substr(0, 8), &t)) return false;
  *time_us = static_cast<int64_t>(t ^ (uint64_t{1} << 63));
  return DecodeSeq(key.substr(8), seq);
}

std::string_view IndexedField(const Event& e, Cf cf) {
  switch (cf) {
    case kBySession:
      return e.session_id;
    case kByAgent:
      return e.agent_id;
    case kByRequest:
      return e.request_id;
    case kByTool:
      return e.tool;
    case kByOrg:
      return e.org_id;
    case kByType:
      return e.type;
    default:
      return {};
  }
}

std::vector<std::pair<Cf, std::string>> IndexEntries(const Event& e, uint64_t seq) {
  std::vector<std::pair<Cf, std::string>> out;
  out.reserve(7);
  for (Cf cf : kFieldIndexes) {
    std::string_view v = IndexedField(e, cf);
    if (!v.empty()) out.emplace_back(cf, IndexKey(v, seq));
  }
  out.emplace_back(kByTime, TimeKey(e.time_us, seq));
  return out;
}

std::string EncodeRecord(const Digest& prev_hash, const Digest& hash, std::string_view body) {
  std::string out;
  out.reserve(1 + 64 + body.size());
  out.push_back(kRecordVersion);
  out.append(reinterpret_cast<const char*>(prev_hash.data()), prev_hash.size());
  out.append(reinterpret_cast<const char*>(hash.data()), hash.size());
  out.append(body);
  return out;
}

Status DecodeRecord(std::string_view value, RecordView* out) {
  if (value.size() < 65 || value[0] != kRecordVersion) {
    return Status::Error(errc::kLogCorrupt, "record value is not a version-1 record");
  }
  std::memcpy(out->prev_hash.data(), value.data() + 1, 32);
  std::memcpy(out->hash.data(), value.data() + 33, 32);
  out->body = value.substr(65);
  return Status::Ok();
}

}  // namespace tollgate::logfmt
