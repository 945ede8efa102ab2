// Helpers shared by the test suites: scratch directories and event builders.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit_query.h"
#include "audit/log_sink.h"
#include "audit/log_store.h"
#include "audit/open_requests.h"
#include "core/event.h"
#include "core/request_state.h"
#include "core/schema.h"
#include "core/stage.h"

namespace tollgate::testing {

// The log as a stage sees it, in memory: events of a request by (org,
// request_id), appended as the log does (seq assigned, a repeated event id
// appended once).
class MemoryLog : public LogView {
 public:
  Status EventsOfRequest(const std::string& org, const std::string& rid,
                         std::vector<Event>* out) const override {
    out->clear();
    for (const auto& e : events_) {
      if (e.org_id == org && e.request_id == rid) out->push_back(e);
    }
    return Status::Ok();
  }
  void Append(const std::vector<Event>& events) {
    for (Event e : events) {
      bool dup = false;
      for (const auto& have : events_) dup |= have.id == e.id;
      if (dup) continue;
      e.seq = events_.size() + 1;
      events_.push_back(std::move(e));
    }
  }
  std::vector<Event> events_;
};

// Processes whose command line holds `tag` (what a tool left running).
inline int Survivors(const std::string& tag) {
  int n = 0;
  DIR* d = opendir("/proc");
  while (dirent* e = readdir(d)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    // read(2), not a stream: a process that exits meanwhile makes the read
    // fail (ESRCH), which libstdc++'s filebuf turns into an exception.
    const int fd = open((std::string("/proc/") + e->d_name + "/cmdline").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string cmd;
    char buf[4096];
    ssize_t got;
    while ((got = read(fd, buf, sizeof buf)) > 0) cmd.append(buf, static_cast<size_t>(got));
    close(fd);
    if (cmd.find(tag) != std::string::npos) ++n;
  }
  closedir(d);
  return n;
}

// What a shell command printed on stdout, and its exit status (-1 when it
// could not start or did not exit).
struct CommandResult {
  int exit_code = -1;
  std::string out;
};
inline CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* f = popen(command.c_str(), "r");
  if (f == nullptr) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) r.out.append(buf, n);
  const int status = pclose(f);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tollgate-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A valid event of `type` for request `request_id` of `org`; ids are
// deterministic and, like the pipeline's, scoped by org (MakeRequestEventId).
inline Event MakeEvent(const std::string& type, const std::string& request_id,
                       const std::string& session = "s1", const std::string& agent = "a1",
                       const std::string& org = "o1", const std::string& tool = "echo",
                       int64_t time_us = 1'790'000'000'000'000, Json data = Json::object()) {
  Event e;
  e.type = type;
  e.request_id = request_id;
  e.id = MakeRequestEventId(org, type, request_id);
  e.session_id = session;
  e.agent_id = agent;
  e.org_id = org;
  e.tool = tool;
  e.time_us = time_us;
  e.data = data.empty() ? Json{{"note", "test"}} : std::move(data);
  return e;
}

// The log's open-request index (docs/log_format.md, "Open requests") holds
// exactly the requests whose histories RequestState finds unfinished.
// Read while nothing is appended (retried if the head moves).
inline void ExpectOpenIndexAgrees(const LogStore& store) {
  if (!HasOpenIndex(store)) return;
  for (int attempt = 0; attempt < 5; ++attempt) {
    uint64_t before = 0, after = 0;
    Digest h;
    ASSERT_TRUE(store.ReadHead(&before, &h).ok());
    std::vector<OpenRequest> open;
    ASSERT_TRUE(ListOpenRequests(store, &open).ok());
    std::set<std::pair<std::string, std::string>> indexed, unfinished;
    for (const OpenRequest& r : open) indexed.insert({r.org_id, r.request_id});
    AuditQuery q;
    q.types = {"request.received"};
    StoreLogView view(store);
    ASSERT_TRUE(ForEachEvent(store, q, [&](Event& received) {
                  std::vector<Event> events;
                  ASSERT_TRUE(view.EventsOfRequest(received.org_id, received.request_id, &events).ok());
                  RequestState st = Summarize(events);
                  if (st.received != nullptr && !st.terminal())
                    unfinished.insert({received.org_id, received.request_id});
                }).ok());
    ASSERT_TRUE(store.ReadHead(&after, &h).ok());
    if (before != after) continue;
    EXPECT_EQ(indexed, unfinished) << "the open-request index disagrees with the events";
    return;
  }
  ADD_FAILURE() << "the log kept growing while the open-request index was checked";
}

// The contract holds for everything a pipeline wrote: every event of the
// log conforms to schemas/event and its data schema, and the open-request
// index agrees with the events.
inline void ExpectEveryEventConforms(const LogStore& store) {
  ExpectOpenIndexAgrees(store);
  AuditQuery q;
  q.limit = kMaxQueryLimit;
  for (;;) {
    AuditPage page;
    ASSERT_TRUE(GetAuditLog(store, QueryScope::Operator(), q, &page).ok());
    for (const Event& e : page.events) {
      Status s = SchemaRegistry::Builtin().ValidateEvent(e.RecordJson());
      EXPECT_TRUE(s.ok()) << e.type << ": " << s.ToString() << "\n" << e.RecordJson().dump();
    }
    if (page.next_cursor.empty()) break;
    q.cursor = page.next_cursor;
  }
}

}  // namespace tollgate::testing
