// A recording: the tool results a past run got, for recorded-result replay
// (replay/replay_stage.h). Pure: built from a past log's events.
//
// Each recorded call is a request that was received and whose execution
// completed; it is keyed by (session, tool, args hash) and calls of one key
// keep the order in which they were received, so the n-th call of a key in
// a re-run gets the n-th recorded result of that key. A result served by an
// earlier replay counts as recorded (a replay of a replay reproduces it); a
// replay mismatch (E_REPLAY_MISMATCH) does not, since no tool produced it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/canonical_json.h"
#include "core/event.h"
#include "core/status.h"

namespace tollgate::replay {

inline constexpr const char* kReplayMismatch = "E_REPLAY_MISMATCH";

struct CallKey {
  std::string session_id, tool, args_hash;
  auto operator<=>(const CallKey&) const = default;
  std::string ToString() const { return session_id + "/" + tool + "/" + args_hash.substr(0, 12); }
};

struct RecordedCall {
  std::string request_id;
  uint64_t completed_seq = 0;  // the execution.completed in the recording
  Json result;                 // its ToolResult, as logged (secrets redacted)
  double duration_ms = 0;
  double cost_usd = 0;
};

class Recording {
 public:
  // Builds from a past log's events (any order). A non-empty `only_session`
  // keeps that session's calls alone.
  static Recording FromEvents(std::vector<Event> events, const std::string& only_session = "");

  // The `index`-th (0-based) recorded call of `key`, or nullptr.
  const RecordedCall* Find(const CallKey& key, size_t index) const;
  // How many calls of `key` were recorded.
  size_t Count(const CallKey& key) const;
  size_t size() const { return size_; }
  bool HasSession(const std::string& session_id) const;

 private:
  std::map<CallKey, std::vector<RecordedCall>> calls_;
  size_t size_ = 0;
};

// Loads a recording from `path`: a data directory (holding log/), a log
// directory, or an export file (`tollgate audit export`, verified first).
// Logs are opened read-only as a secondary, so the recorded run may still
// be up.
Status LoadRecording(const std::string& path, const std::string& only_session, Recording* out);

}  // namespace tollgate::replay
