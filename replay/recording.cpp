#include "replay/recording.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "audit/verify.h"
#include "replay/log_source.h"

namespace tollgate::replay {

Recording Recording::FromEvents(std::vector<Event> events, const std::string& only_session) {
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.seq < b.seq; });
  struct Received {
    CallKey key;
    uint64_t seq;
  };
  std::unordered_map<std::string, Received> received;  // by org NUL request_id
  // (received seq, key, call): sorted by when the request was received.
  std::vector<std::tuple<uint64_t, CallKey, RecordedCall>> calls;
  for (const Event& e : events) {
    if (!only_session.empty() && e.session_id != only_session) continue;
    if (e.type == ev::kRequestReceived) {
      received[OrgRequestKey(e.org_id, e.request_id)] = {
          {e.session_id, e.tool, e.data.value("args_hash", "")}, e.seq};
    } else if (e.type == ev::kExecutionCompleted) {
      auto r = received.find(OrgRequestKey(e.org_id, e.request_id));
      if (r == received.end()) continue;
      const Json result = e.data.value("result", Json());
      if (!result.is_object()) continue;
      const Json err = result.value("error", Json());
      if (err.is_object() && err.value("code", "") == kReplayMismatch) continue;
      RecordedCall c{e.request_id, e.seq, result, e.data.value("duration_ms", 0.0),
                     e.data.value("cost_usd", 0.0)};
      calls.emplace_back(r->second.seq, r->second.key, std::move(c));
      received.erase(r);  // one result per request
    }
  }
  std::stable_sort(calls.begin(), calls.end(),
                   [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  Recording rec;
  for (auto& [seq, key, call] : calls) rec.calls_[key].push_back(std::move(call));
  rec.size_ = calls.size();
  return rec;
}

const RecordedCall* Recording::Find(const CallKey& key, size_t index) const {
  auto it = calls_.find(key);
  if (it == calls_.end() || index >= it->second.size()) return nullptr;
  return &it->second[index];
}

size_t Recording::Count(const CallKey& key) const {
  auto it = calls_.find(key);
  return it == calls_.end() ? 0 : it->second.size();
}

bool Recording::HasSession(const std::string& session_id) const {
  auto it = calls_.lower_bound(CallKey{session_id, "", ""});
  return it != calls_.end() && it->first.session_id == session_id;
}

namespace {

Status LoadExport(const std::string& path, std::vector<Event>* events) {
  {
    std::ifstream in(path);
    if (!in) return Status::Error(errc::kNotFound, "cannot open " + path);
    VerifyReport r = VerifyExport(in);
    if (!r.ok()) {
      return Status::Error(errc::kChainBroken,
                           path + " does not verify: " + r.Summary() +
                               (r.problems.empty() ? "" : "; " + r.problems[0].status.ToString()));
    }
  }
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    Json j;
    Status s = ParseJson(line, &j);
    if (!s.ok()) return s;
    if (j.contains("tollgate_export") || j.contains("tollgate_export_end")) continue;
    Event e;
    s = EventFromJson(j, &e);
    if (!s.ok()) return s;
    events->push_back(std::move(e));
  }
  return Status::Ok();
}

}  // namespace

Status LoadRecording(const std::string& path, const std::string& only_session, Recording* out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<Event> events;
  if (fs::is_regular_file(path, ec)) {
    Status s = LoadExport(path, &events);
    if (!s.ok()) return s;
  } else {
    const std::string log_dir = fs::exists(fs::path(path) / "log" / "CURRENT", ec) ? path + "/log" : path;
    if (!fs::exists(fs::path(log_dir) / "CURRENT", ec)) {
      return Status::Error(errc::kNotFound, path + " is neither a data directory, a log, nor an export file");
    }
    std::unique_ptr<LogStore> store;
    Status s = LogStore::Open(log_dir, OpenMode::kSecondary, &store);
    if (s.ok()) s = store->CatchUp();
    if (!s.ok()) return s;
    if (!only_session.empty()) {
      s = ReadSession(*store, only_session, &events);
    } else {
      s = ReadTypes(*store, {ev::kRequestReceived, ev::kExecutionCompleted}, 0, &events);
    }
    if (!s.ok()) return s;
  }
  *out = Recording::FromEvents(std::move(events), only_session);
  if (!only_session.empty() && out->size() == 0) {
    return Status::Error(errc::kNotFound,
                         "the recording holds no completed call of session '" + only_session + "'");
  }
  return Status::Ok();
}

}  // namespace tollgate::replay
