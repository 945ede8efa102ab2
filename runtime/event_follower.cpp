#include "runtime/event_follower.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "core/log.h"
#include "core/messages.h"
#include "core/sha256.h"

namespace tollgate {
namespace {

constexpr std::chrono::milliseconds kTxnTimeout{30000};
// 9999-12-31T23:59:59.999Z: the latest record time a refusal records.
constexpr int64_t kLatestRecordMs = 253402300799999;

int64_t ReadOffset(const std::string& path) {
  if (path.empty()) return 0;
  std::ifstream in(path);
  Json j;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && text.empty()) return 0;
  if (!ParseJson(text, &j).ok() || !j.is_object()) return 0;
  return std::max<int64_t>(0, j.value("next_offset", int64_t{0}));
}

std::string Hmac(const std::string& key, const std::string& value) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(value.data()), value.size(), mac, &len);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[mac[i] >> 4];
    out += hex[mac[i] & 15];
  }
  return out;
}

}  // namespace

Status EventsKey::Load(const std::string& path, bool create, std::shared_ptr<const EventsKey>* out) {
  auto k = std::make_shared<EventsKey>();
  std::ifstream in(path, std::ios::binary);
  if (!in && create) {
    std::random_device rd;
    std::string bytes;
    for (int i = 0; i < 32; ++i) bytes += static_cast<char>(rd() & 0xff);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
      const bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
      ::fsync(fd);
      ::close(fd);
      if (!ok) return Status::Error(errc::kLogIO, "cannot write " + path);
    }
    in.open(path, std::ios::binary);  // ours, or one made meanwhile
  }
  if (!in) {
    return Status::Error(errc::kNotFound,
                         "no deployment key at " + path + " (the log keeper makes it on first start)");
  }
  k->key_.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (k->key_.size() < 32) return Status::Error(errc::kInvalidRequest, path + " holds fewer than 32 bytes");
  *out = std::move(k);
  return Status::Ok();
}

std::string EventsKey::Derive(const std::string& label) const {
  Digest d;
  (void)DigestFromHex(Hmac(key_, "tollgate/derive/" + label), &d);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

void EventsKey::Seal(Message* m) const { m->headers[kHeaderEventsMac] = Hmac(key_, m->value); }

bool EventsKey::Verify(const Message& m) const {
  auto it = m.headers.find(kHeaderEventsMac);
  if (it == m.headers.end()) return false;
  const std::string want = Hmac(key_, m.value);
  return it->second.size() == want.size() && CRYPTO_memcmp(it->second.data(), want.data(), want.size()) == 0;
}

Status EventMessage(const Event& e, const std::string& topic, size_t max_event_bytes, const EventsKey& key,
                    Message* out) {
  out->topic = topic;
  out->key = e.org_id + "/" + e.agent_id;
  out->headers[kHeaderEventId] = e.id;
  Status s = EncodeEventBody(e, max_event_bytes, &out->value);
  if (s.ok()) key.Seal(out);
  return s;
}

Status EventFollower::Open(FollowerOptions options, bool log_empty, EventSink& sink,
                           std::unique_ptr<EventFollower>* out) {
  std::unique_ptr<EventFollower> f(new EventFollower());
  f->options_ = std::move(options);
  f->sink_ = &sink;
  // A log with nothing in it starts from the beginning whatever the file
  // says (a data dir whose log was removed).
  const int64_t from = log_empty ? 0 : ReadOffset(f->options_.offset_path);
  Status s = PartitionReader::Open(f->options_.bus, f->options_.bus.topics.events(), 0, from, &f->reader_);
  if (!s.ok()) return s;
  f->saved_ = from;
  *out = std::move(f);
  return Status::Ok();
}

int64_t EventFollower::position() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reader_->position();
}

Status EventFollower::CatchUp() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t start = reader_->position();
  const RefusalBlock block_before = block_;
  std::vector<Event> events;
  // The summary of the refusals counted so far, where every copy makes it:
  // before the next event, or when the block ends.
  auto summarize = [&] {
    if (block_.pending.count == 0) return;
    log::Warn({"follower"}) << block_.pending.count << " more messages that are not sealed events, "
                            << block_.pending.first_source << " to " << block_.pending.last_source
                            << ", refused and counted\n";
    events.push_back(RefusalSummaryEvent(block_.pending, block_.pending.last_time_us));
    block_.pending = RefusalCount{};
  };
  Status s = reader_->ReadToEnd(options_.timeout, [&](const Message& m) {
    if (m.offset / kRefusalBlockOffsets != block_.block) {
      summarize();
      block_ = RefusalBlock{m.offset / kRefusalBlockOffsets};
    }
    Event e;
    const bool sealed = options_.key && options_.key->Verify(m);
    Status d = sealed ? EventFromText(m.value, &e)
                      : Status::Error("E_EVENT_REFUSED", "no valid " + std::string(kHeaderEventsMac));
    if (d.ok()) d = ValidateEnvelope(e);
    if (!d.ok()) {
      ++stats_.foreign;
      block_.refused = true;
      const std::string source = m.topic + "/" + std::to_string(m.partition) + "/" + std::to_string(m.offset);
      // Its time is the record's timestamp, not the clock: every copy
      // must append the same bytes.
      // (Clamped: a producer sets any timestamp it likes, up to INT64_MAX.)
      const int64_t time_us = std::clamp<int64_t>(m.timestamp_ms, 1, kLatestRecordMs) * 1000;
      const char* check = sealed ? "event" : "mac";
      if (block_.logged >= kRefusalsLoggedPerBlock) {
        if (block_.pending.count == 0) {
          block_.pending.stage = "follower";
          block_.pending.code = "E_EVENT_REFUSED";
        }
        block_.pending.Add(source, time_us, m.value.size(), check);
        return Status::Ok();
      }
      ++block_.logged;
      log::Warn({"follower"}) << source << " is not a sealed event, refused: " << d.ToString() << "\n";
      events.push_back(
          UnprovenRefusalEvent(m, source, time_us,
                               {"follower", "E_EVENT_REFUSED",
                                "the events topic holds a message that is not a sealed event: " + d.message(),
                                Json{{"check", check}}}));
      return Status::Ok();
    }
    summarize();
    e.seq = 0;
    e.prev_hash.clear();
    e.hash.clear();
    events.push_back(std::move(e));
    return Status::Ok();
  });
  if (!s.ok() && s.code() == errc::kOffsetLost) return s;
  if (!events.empty()) {
    // One group commit; on failure read them all again next time.
    std::vector<EventSink::Appended> appended;
    sink_->AppendAll(events, &appended);
    for (size_t i = 0; i < appended.size(); ++i) {
      if (!appended[i].status.ok()) {
        (void)reader_->Seek(start);
        block_ = block_before;
        return Status::Error(appended[i].status.code(),
                             "following " + events[i].id + ": " + appended[i].status.message());
      }
      ++(appended[i].duplicate ? stats_.duplicates : stats_.appended);
    }
  }
  if (!s.ok()) return s;  // what was read before the error is kept
  return SaveOffset();
}

Status EventFollower::SaveOffset() {
  // Never inside a block that had a refusal: read again from its start, a
  // restarted copy counts that block exactly as every other copy did.
  const int64_t next = block_.refused ? block_.block * kRefusalBlockOffsets : reader_->position();
  if (options_.offset_path.empty() || next == saved_) return Status::Ok();
  const std::string tmp = options_.offset_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << Json{{"topic", options_.bus.topics.events()}, {"partition", 0}, {"next_offset", next}}.dump()
        << "\n";
    if (!out) return Status::Error(errc::kLogIO, "cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, options_.offset_path, ec);
  if (ec) return Status::Error(errc::kLogIO, "cannot write " + options_.offset_path + ": " + ec.message());
  saved_ = next;
  return Status::Ok();
}

Status TopicEventSink::Open(const BusConfig& bus, const std::string& transactional_id,
                            EventFollower& follower, SeqOfEvent seq_of, std::shared_ptr<const EventsKey> key,
                            std::unique_ptr<TopicEventSink>* out) {
  std::unique_ptr<TopicEventSink> sink(new TopicEventSink(bus, follower, std::move(seq_of)));
  sink->transactional_id_ = transactional_id;
  sink->key_ = std::move(key);
  Status s = Producer::Open(bus, transactional_id, &sink->producer_);
  if (!s.ok()) return s;
  *out = std::move(sink);
  return Status::Ok();
}

void TopicEventSink::AppendAll(std::vector<Event> events, std::vector<Appended>* results) {
  results->assign(events.size(), Appended{});
  auto fail_all = [&](const Status& s) {
    for (auto& r : *results) r.status = s;
  };
  std::lock_guard<std::mutex> lock(mu_);
  Status s;
  if (!producer_) s = Producer::Open(bus_, transactional_id_, &producer_);
  if (s.ok()) s = producer_->BeginTransaction();
  for (size_t i = 0; s.ok() && i < events.size(); ++i) {
    Message m;
    s = EventMessage(events[i], bus_.topics.events(), kMaxMessageBytes, *key_, &m);
    if (s.ok()) s = producer_->Send(m);
  }
  if (s.ok()) s = producer_->CommitTransaction(kTxnTimeout);
  if (!s.ok()) {
    Status a = producer_ ? producer_->AbortTransaction(kTxnTimeout) : s;
    if (!a.ok()) producer_.reset();  // fatal for this producer: the next call opens a fresh one
    return fail_all(Status::Error(errc::kLogIO, "events not committed: " + s.message()));
  }
  s = follower_.CatchUp();
  if (!s.ok()) return fail_all(s);
  for (size_t i = 0; i < events.size(); ++i) {
    (*results)[i].status = seq_of_(events[i].id, &(*results)[i].seq);
  }
}

}  // namespace tollgate
