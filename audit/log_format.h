// The on-disk format of the event log: column family names, key and value
// encodings. Pure functions only; docs/log_format.md is the prose version and
// the two must agree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/event.h"
#include "core/sha256.h"
#include "core/status.h"

namespace tollgate::logfmt {

// Column families, in the order they are opened. kDefault exists because
// RocksDB requires it; the log stores nothing there.
enum Cf : int {
  kDefault = 0,
  kEvents,     // be64(seq) -> record value
  kBySession,  // session_id NUL be64(seq) -> ""
  kByAgent,    // agent_id NUL be64(seq) -> ""
  kByRequest,  // request_id NUL be64(seq) -> ""
  kByTool,     // tool NUL be64(seq) -> ""
  kByOrg,      // org_id NUL be64(seq) -> ""
  kByType,     // type NUL be64(seq) -> ""
  kByTime,     // be64(time_us ^ sign bit) be64(seq) -> ""
  kDedupe,     // event id -> be64(seq)
  kMeta,       // fixed keys below
  kMerkle,     // level (1 byte) be64(index) -> 32 raw bytes; "size" -> be64 (audit/merkle_store.h)
  kNumCfs,
};
const char* CfName(int cf);
// The field-index families, in the order get_audit_log prefers them.
inline constexpr Cf kFieldIndexes[] = {kByRequest, kBySession, kByAgent, kByTool, kByType, kByOrg};

inline constexpr std::string_view kMetaHeadSeq = "head_seq";    // be64
inline constexpr std::string_view kMetaHeadHash = "head_hash";  // 32 raw bytes
inline constexpr std::string_view kMetaFormat = "format";       // "tollgate-log-1"
inline constexpr std::string_view kFormatName = "tollgate-log-1";

// The open-request index (audit/open_requests.h), in the meta family:
// kMetaOpenPrefix org_id NUL request_id -> be64(seq of its request.received),
// and kMetaOpenIndex -> "1" once the index covers the whole log.
inline constexpr std::string_view kMetaOpenIndex = "open_index";
inline constexpr std::string_view kMetaOpenPrefix{"open\0", 5};
std::string OpenKey(std::string_view org_id, std::string_view request_id);
bool ParseOpenKey(std::string_view key, std::string* org_id, std::string* request_id);
// What appending `e` does to the index (the rule is in open_requests.h).
enum class OpenOp : uint8_t { kNone, kOpen, kClose };
OpenOp OpenIndexOp(const Event& e);

std::string EncodeSeq(uint64_t seq);                 // 8 bytes, big-endian
bool DecodeSeq(std::string_view in, uint64_t* seq);  // exactly 8 bytes

// Key of a field index entry: value NUL be64(seq). Field values never hold
// NUL (ValidateEnvelope refuses control characters), so keys of one value
// form one contiguous, seq-ordered range starting at IndexPrefix(value).
std::string IndexPrefix(std::string_view value);
std::string IndexKey(std::string_view value, uint64_t seq);
// Splits an index key; false if it is not of that form.
bool ParseIndexKey(std::string_view key, std::string_view* value, uint64_t* seq);

// Time index: be64 of time_us with the sign bit flipped (so negative times
// sort first), then be64(seq).
std::string TimeKey(int64_t time_us, uint64_t seq);
bool ParseTimeKey(std::string_view key, int64_t* time_us, uint64_t* seq);

// The field an index family covers, read off an event ("" = not indexed).
std::string_view IndexedField(const Event& e, Cf cf);

// Every index entry (family, key) that event `e` at `seq` must have: one per
// non-empty field index, plus the time index. The dedupe entry is separate.
std::vector<std::pair<Cf, std::string>> IndexEntries(const Event& e, uint64_t seq);

// Record value: version byte 0x01, prev_hash (32 raw bytes), hash (32 raw
// bytes), canonical body bytes.
inline constexpr char kRecordVersion = 0x01;
std::string EncodeRecord(const Digest& prev_hash, const Digest& hash, std::string_view body);
struct RecordView {
  Digest prev_hash;
  Digest hash;
  std::string_view body;  // points into the decoded buffer
};
Status DecodeRecord(std::string_view value, RecordView* out);

// The chain link: SHA-256(prev_hash || canonical body bytes).
inline Digest ChainHash(const Digest& prev, std::string_view body) {
  return Sha256(std::string_view(reinterpret_cast<const char*>(prev.data()), prev.size()), body);
}
// The same link over a body given as head + seq digits + links + tail (see
// EventBodyParts), so the writer need not join them first.
inline Digest ChainHash(const Digest& prev, std::string_view head, std::string_view seq_digits,
                        std::string_view links, std::string_view tail) {
  return Sha256({std::string_view(reinterpret_cast<const char*>(prev.data()), prev.size()), head, seq_digits,
                 links, tail});
}

}  // namespace tollgate::logfmt
