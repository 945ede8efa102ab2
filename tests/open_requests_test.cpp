// audit/open_requests.h: the log's index of unfinished requests, against a
// real RocksDB, checked against RequestState (what the reconciler and the
// approve stage would conclude from each request's whole history).
#include "audit/open_requests.h"

#include <gtest/gtest.h>
#include <rocksdb/write_batch.h>

#include <map>
#include <set>

#include "audit/approvals.h"
#include "audit/event_log.h"
#include "audit/log_sink.h"
#include "core/messages.h"
#include "core/request_state.h"
#include "test_util.h"

namespace tollgate {
namespace {

using testing::MakeEvent;
using testing::TempDir;

std::unique_ptr<EventLog> OpenLog(const std::string& path) {
  std::unique_ptr<EventLog> log;
  Status s = EventLog::Open(path, LogOptions{}, &log);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return log;
}

// One step of a request's history; `n` keeps ids of repeated types apart.
Event Step(const std::string& type, const std::string& rid, const std::string& org,
           Json data = Json::object(), int n = 0) {
  Event e = MakeEvent(type, rid, "s1", "a1", org, "echo", 1'790'000'000'000'000, std::move(data));
  if (n > 0) e.id += "-" + std::to_string(n);
  return e;
}
Json Verdict(const char* v) { return {{"verdict", v}}; }
Json Rejected(const char* code) { return {{"error", {{"code", code}, {"message", "m"}}}}; }

// Every history the pipeline can write, each under two orgs with the same
// request id (ids are scoped by org).
std::vector<Event> Histories(const std::string& org) {
  std::vector<Event> h;
  auto add = [&h](std::vector<Event> es) { h.insert(h.end(), es.begin(), es.end()); };
  add({Step("request.received", "just-received", org)});
  add({Step("request.received", "allowed", org), Step("decision.made", "allowed", org, Verdict("allow"))});
  add({Step("request.received", "ran", org), Step("decision.made", "ran", org, Verdict("allow")),
       Step("execution.started", "ran", org), Step("execution.completed", "ran", org)});
  add({Step("request.received", "denied", org), Step("decision.made", "denied", org, Verdict("deny"))});
  add({Step("request.received", "asked", org), Step("decision.made", "asked", org, Verdict("ask")),
       Step("approval.requested", "asked", org, {{"approvers_needed", 2}})});
  add({Step("request.received", "half-granted", org),
       Step("decision.made", "half-granted", org, Verdict("ask")),
       Step("approval.requested", "half-granted", org, {{"approvers_needed", 2}}),
       Step("approval.granted", "half-granted", org, {{"approver", "u1"}})});
  add({Step("request.received", "refused", org), Step("decision.made", "refused", org, Verdict("ask")),
       Step("approval.requested", "refused", org),
       Step("approval.denied", "refused", org, {{"approver", "u1"}})});
  add({Step("request.received", "expired", org), Step("decision.made", "expired", org, Verdict("ask")),
       Step("approval.requested", "expired", org), Step("approval.expired", "expired", org)});
  add({Step("request.received", "granted", org), Step("decision.made", "granted", org, Verdict("ask")),
       Step("approval.requested", "granted", org),
       Step("approval.granted", "granted", org, {{"approver", "u1"}})});
  add({Step("request.received", "lost", org),
       Step("request.rejected", "lost", org, Rejected(errc::kRequestLost))});
  add({Step("request.received", "copy", org),
       Step("request.rejected", "copy", org, Rejected(errc::kDuplicateRequest))});
  add({Step("request.rejected", "never-received", org, Rejected(errc::kInvalidRequest))});
  add({Step("request.received", "again", org),
       Step("request.rejected", "again", org, Rejected(errc::kRequestLost)),
       Step("request.received", "again", org, {}, 2)});
  return h;
}

// What RequestState says of every request in the log: (org, id) -> open.
std::set<std::pair<std::string, std::string>> Unfinished(const LogStore& store) {
  std::set<std::pair<std::string, std::string>> out;
  StoreLogView view(store);
  for (const std::string org : {"o1", "o2"}) {
    for (const Event& e : Histories(org)) {
      std::vector<Event> events;
      EXPECT_TRUE(view.EventsOfRequest(org, e.request_id, &events).ok());
      RequestState st = Summarize(events);
      if (st.received != nullptr && !st.terminal()) out.insert({org, e.request_id});
    }
  }
  return out;
}

std::set<std::pair<std::string, std::string>> Indexed(const LogStore& store) {
  std::vector<OpenRequest> open;
  Status s = ListOpenRequests(store, &open);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::set<std::pair<std::string, std::string>> out;
  uint64_t last = 0;
  for (const OpenRequest& r : open) {
    EXPECT_GT(r.received_seq, last) << "not oldest first";
    last = r.received_seq;
    Event received;
    EXPECT_TRUE(store.ReadEvent(r.received_seq, &received).ok());
    EXPECT_EQ(received.type, "request.received");
    EXPECT_EQ(received.request_id, r.request_id);
    out.insert({r.org_id, r.request_id});
  }
  return out;
}

void AppendAll(EventLog& log, const std::vector<Event>& events) {
  for (const Event& e : events) {
    AppendResult r = log.Append(e);
    ASSERT_TRUE(r.status.ok()) << e.id << ": " << r.status.ToString();
  }
}

TEST(OpenRequests, TheIndexHoldsExactlyTheRequestsTheLogShowsUnfinished) {
  TempDir dir;
  auto log = OpenLog(dir.path());
  AppendAll(*log, Histories("o1"));
  AppendAll(*log, Histories("o2"));
  const auto want = Unfinished(log->store());
  // The histories above leave these open, in both orgs; the rest ended.
  EXPECT_EQ(want.size(), 2u * 7u) << "just-received, allowed, asked, half-granted, granted, copy, again";
  EXPECT_EQ(Indexed(log->store()), want);
  // Appending an event again changes nothing.
  AppendAll(*log, {Step("request.received", "ran", "o1")});
  EXPECT_EQ(Indexed(log->store()), want);

  // Only the pending approvals come back, from the index.
  std::vector<PendingApproval> pending;
  ASSERT_TRUE(ListPendingApprovals(log->store(), {"o1", ""}, &pending).ok());
  std::set<std::string> ids;
  for (const auto& p : pending) ids.insert(p.request_id);
  EXPECT_EQ(ids, (std::set<std::string>{"asked", "half-granted"}));
}

TEST(OpenRequests, ALogWrittenBeforeTheIndexIsIndexedWhenFirstOpenedForWriting) {
  TempDir dir;
  std::set<std::pair<std::string, std::string>> want;
  {
    auto log = OpenLog(dir.path());
    AppendAll(*log, Histories("o1"));
    AppendAll(*log, Histories("o2"));
    want = Unfinished(log->store());
  }
  {
    // Strip the index, as a log written by an older tollgate has none.
    std::unique_ptr<LogStore> store;
    ASSERT_TRUE(LogStore::Open(dir.path(), OpenMode::kPrimary, &store).ok());
    rocksdb::WriteBatch wb;
    wb.Delete(store->cf(logfmt::kMeta), logfmt::kMetaOpenIndex);
    wb.DeleteRange(store->cf(logfmt::kMeta), logfmt::kMetaOpenPrefix, std::string("open\1", 5));
    ASSERT_TRUE(store->db()->Write({}, &wb).ok());
  }
  {
    // A read-only reader of such a log falls back to walking it.
    std::unique_ptr<LogStore> ro;
    ASSERT_TRUE(LogStore::Open(dir.path(), OpenMode::kReadOnly, &ro).ok());
    EXPECT_FALSE(HasOpenIndex(*ro));
    std::vector<OpenRequest> open;
    EXPECT_EQ(ListOpenRequests(*ro, &open).code(), errc::kNotFound);
    std::vector<PendingApproval> pending;
    ASSERT_TRUE(ListPendingApprovals(*ro, {"o2", ""}, &pending).ok());
    EXPECT_EQ(pending.size(), 2u);
  }
  auto log = OpenLog(dir.path());
  EXPECT_TRUE(HasOpenIndex(log->store()));
  EXPECT_EQ(Indexed(log->store()), want);
  // And it is kept from then on.
  AppendAll(*log, {Step("execution.completed", "allowed", "o2")});
  want.erase({"o2", "allowed"});
  EXPECT_EQ(Indexed(log->store()), want);
}

}  // namespace
}  // namespace tollgate
