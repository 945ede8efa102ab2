#include "runtime/kafka_bus.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "core/log.h"
#include "runtime/tcp_forward.h"

namespace tollgate {
namespace {

Status KafkaError(const std::string& what, rd_kafka_resp_err_t err) {
  return Status::Error(errc::kKafka, what + ": " + rd_kafka_err2str(err));
}

Status FromKafkaError(const std::string& what, rd_kafka_error_t* error) {
  if (error == nullptr) return Status::Ok();
  const bool abortable = rd_kafka_error_txn_requires_abort(error);
  const bool retriable = rd_kafka_error_is_retriable(error);
  Status s = Status::Error(abortable || retriable ? errc::kTxnAbortable : errc::kKafka,
                           what + ": " + rd_kafka_error_string(error));
  rd_kafka_error_destroy(error);
  return s;
}

// librdkafka's own lines go through our structured log (core/log.h), not
// straight to stderr in its "%3|...|" format.
void KafkaLog(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  log::Line(level <= 3   ? log::Level::kError
            : level <= 4 ? log::Level::kWarn
                         : log::Level::kInfo,
            {"kafka"})
      << rd_kafka_name(rk) << ": " << fac << ": " << buf;
}

class Conf {
 public:
  explicit Conf(const BusConfig& c) : conf_(rd_kafka_conf_new()) {
    Set("bootstrap.servers", c.brokers);
    Set("client.id", c.client_id);
    Set("log_level", "4");  // warnings and worse
    rd_kafka_conf_set_log_cb(conf_, KafkaLog);
    for (const auto& [k, v] : c.extra) Set(k, v);
  }
  ~Conf() {
    if (conf_) rd_kafka_conf_destroy(conf_);
  }
  void Set(const std::string& k, const std::string& v) {
    char err[512];
    if (rd_kafka_conf_set(conf_, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK && status_.ok()) {
      status_ = Status::Error(errc::kKafka, "bad Kafka setting " + k + "=" + v + ": " + err);
    }
  }
  const Status& status() const { return status_; }
  rd_kafka_conf_t* get() const { return conf_; }
  // rd_kafka_new takes ownership on success.
  rd_kafka_t* Create(rd_kafka_type_t type, Status* s) {
    if (!status_.ok()) {
      *s = status_;
      return nullptr;
    }
    char err[512];
    rd_kafka_t* rk = rd_kafka_new(type, conf_, err, sizeof err);
    if (rk == nullptr) {
      *s = Status::Error(errc::kKafka, std::string("cannot create a Kafka client: ") + err);
      return nullptr;
    }
    conf_ = nullptr;
    return rk;
  }

 private:
  rd_kafka_conf_t* conf_;
  Status status_;
};

using OffsetMap = std::map<std::pair<std::string, int32_t>, int64_t>;

rd_kafka_topic_partition_list_t* ToList(const OffsetMap& offsets) {
  auto* list = rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size()));
  for (const auto& [tp, off] : offsets) {
    rd_kafka_topic_partition_list_add(list, tp.first.c_str(), tp.second)->offset = off;
  }
  return list;
}

// A fetched message as a stage sees it (m->err must be 0).
Message ToMessage(const rd_kafka_message_t* m) {
  Message msg;
  msg.topic = rd_kafka_topic_name(m->rkt);
  msg.partition = m->partition;
  msg.offset = m->offset;
  msg.timestamp_ms = std::max<int64_t>(0, rd_kafka_message_timestamp(m, nullptr));
  if (m->key) msg.key.assign(static_cast<const char*>(m->key), m->key_len);
  if (m->payload) msg.value.assign(static_cast<const char*>(m->payload), m->len);
  rd_kafka_headers_t* hdrs = nullptr;
  // The headers belong to `m`; rd_kafka_message_headers parses them.
  if (rd_kafka_message_headers(const_cast<rd_kafka_message_t*>(m), &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name;
    const void* val;
    size_t size;
    for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &val, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
         ++i) {
      msg.headers[name] = val ? std::string(static_cast<const char*>(val), size) : "";
    }
  }
  return msg;
}

// How many partitions `topic` has (metadata request).
Status PartitionCount(rd_kafka_t* rk, const std::string& topic, int timeout_ms, int* out) {
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms);
  rd_kafka_topic_destroy(rkt);
  if (err) return KafkaError("metadata of " + topic, err);
  *out = md->topic_cnt == 1 && !md->topics[0].err ? md->topics[0].partition_cnt : 0;
  rd_kafka_metadata_destroy(md);
  if (*out <= 0) return Status::Error(errc::kKafka, "topic " + topic + " does not exist");
  return Status::Ok();
}

// A partition and the offsets it holds: [low, high).
struct PartitionSpan {
  std::string topic;
  int32_t partition = 0;
  int64_t low = 0, high = 0;
};

// Every partition of `topics` with its watermarks.
Status ReadPartitionSpans(rd_kafka_t* rk, const std::vector<std::string>& topics, int timeout_ms,
                          std::vector<PartitionSpan>* out) {
  for (const auto& topic : topics) {
    int partitions = 0;
    Status s = PartitionCount(rk, topic, timeout_ms, &partitions);
    if (!s.ok()) return s;
    for (int32_t p = 0; p < partitions; ++p) {
      PartitionSpan span{topic, p};
      rd_kafka_resp_err_t err =
          rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &span.low, &span.high, timeout_ms);
      if (err) return KafkaError("offsets of " + topic + "[" + std::to_string(p) + "]", err);
      out->push_back(std::move(span));
    }
  }
  return Status::Ok();
}

}  // namespace

// ---------------------------------------------------------------- broker

Status EmbeddedBroker::Start(int brokers, std::unique_ptr<EmbeddedBroker>* out, int bootstrap_port) {
  std::unique_ptr<EmbeddedBroker> b(new EmbeddedBroker());
  BusConfig bc;
  Conf conf(bc);
  conf.Set("bootstrap.servers", "");
  Status s;
  b->handle_ = conf.Create(RD_KAFKA_PRODUCER, &s);
  if (!s.ok()) return s;
  b->cluster_ = rd_kafka_mock_cluster_new(b->handle_, brokers);
  if (b->cluster_ == nullptr) return Status::Error(errc::kKafka, "cannot start the embedded broker");
  b->bootstrap_ = rd_kafka_mock_cluster_bootstraps(b->cluster_);
  if (bootstrap_port >= 0) {
    // Only bootstrap connections pass through it; clients then talk to the
    // address the metadata advertises (the mock's own), so data never does.
    // Any one broker of the cluster answers for all in its metadata.
    s = TcpForward::Start(bootstrap_port, b->bootstrap_.substr(0, b->bootstrap_.find(',')), &b->forward_);
    if (!s.ok()) return Status::Error(s.code(), "the embedded broker's bootstrap port: " + s.message());
    b->bootstrap_ = "127.0.0.1:" + std::to_string(b->forward_->port());
  }
  *out = std::move(b);
  return Status::Ok();
}

EmbeddedBroker::~EmbeddedBroker() {
  forward_.reset();  // no new bootstrap connections to a broker going away
  if (cluster_) rd_kafka_mock_cluster_destroy(cluster_);
  if (handle_) rd_kafka_destroy(handle_);
}

Status EmbeddedBroker::CreateTopic(const std::string& topic, int partitions) {
  rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, 1);
  if (err && err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) return KafkaError("create topic " + topic, err);
  return Status::Ok();
}

Status EmbeddedBroker::SetBrokerDown(int32_t id) {
  rd_kafka_resp_err_t err = rd_kafka_mock_broker_set_down(cluster_, id);
  return err ? KafkaError("broker down", err) : Status::Ok();
}

Status EmbeddedBroker::SetBrokerUp(int32_t id) {
  rd_kafka_resp_err_t err = rd_kafka_mock_broker_set_up(cluster_, id);
  return err ? KafkaError("broker up", err) : Status::Ok();
}

void EmbeddedBroker::PushRequestErrors(int16_t api_key, int count, int error) {
  std::vector<rd_kafka_resp_err_t> errs(count, static_cast<rd_kafka_resp_err_t>(error));
  rd_kafka_mock_push_request_errors_array(cluster_, api_key, errs.size(), errs.data());
}

// ---------------------------------------------------------------- topics

int PartitionsOf(const BusConfig& config, const std::string& topic) {
  return topic == config.topics.events() ? 1 : config.partitions;
}

int32_t PartitionOfKey(const std::string& key, int32_t partitions) {
  if (partitions <= 0) return 0;
  // What the producer's partitioner (murmur2_random) does with a key; it
  // reads neither the topic nor the opaques.
  return rd_kafka_msg_partitioner_murmur2(nullptr, key.data(), key.size(), partitions, nullptr, nullptr);
}

Status EnsureTopics(const BusConfig& config, std::chrono::milliseconds timeout) {
  Conf conf(config);
  Status s;
  rd_kafka_t* rk = conf.Create(RD_KAFKA_PRODUCER, &s);
  if (!s.ok()) return s;
  std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t*)> guard(rk, rd_kafka_destroy);
  // Only the missing topics are created: some brokers (the embedded mock
  // cluster among them) do not implement CreateTopics at all.
  std::vector<std::string> names;
  {
    const rd_kafka_metadata_t* md = nullptr;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, nullptr, &md, static_cast<int>(timeout.count()));
    if (err) return KafkaError("reading topic metadata from " + config.brokers, err);
    std::set<std::string> present;
    for (int i = 0; i < md->topic_cnt; ++i) {
      if (md->topics[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
      present.insert(md->topics[i].topic);
      if (md->topics[i].topic == config.topics.events() && md->topics[i].partition_cnt != 1) {
        s = Status::Error(errc::kKafka,
                          config.topics.events() + " has " + std::to_string(md->topics[i].partition_cnt) +
                              " partitions; it must have exactly one (the record's total order: "
                              "docs/deployments.md)");
      }
    }
    rd_kafka_metadata_destroy(md);
    if (!s.ok()) return s;
    for (const auto& t : config.topics.All()) {
      if (!present.count(t)) names.push_back(t);
    }
  }
  if (names.empty()) return Status::Ok();
  std::vector<rd_kafka_NewTopic_t*> news;
  for (const auto& t : names) {
    char err[256];
    const bool events = t == config.topics.events();
    news.push_back(rd_kafka_NewTopic_new(t.c_str(), PartitionsOf(config, t), -1, err, sizeof err));
    // The events topic is the distributed deployment's record: kept for ever.
    if (events) rd_kafka_NewTopic_set_config(news.back(), "retention.ms", "-1");
    if (events) rd_kafka_NewTopic_set_config(news.back(), "retention.bytes", "-1");
  }
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t* opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  char err[256];
  rd_kafka_AdminOptions_set_operation_timeout(opts, static_cast<int>(timeout.count()), err, sizeof err);
  rd_kafka_CreateTopics(rk, news.data(), news.size(), opts, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, static_cast<int>(timeout.count()) + 1000);
  if (ev == nullptr) {
    s = Status::Error(errc::kKafka, "creating topics timed out; is the broker at " + config.brokers + " up?");
  } else if (rd_kafka_event_error(ev)) {
    s = Status::Error(errc::kKafka,
                      std::string("creating topics failed: ") + rd_kafka_event_error_string(ev));
  } else {
    size_t n = 0;
    const rd_kafka_topic_result_t** res =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    for (size_t i = 0; i < n && s.ok(); ++i) {
      rd_kafka_resp_err_t e = rd_kafka_topic_result_error(res[i]);
      if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        s = KafkaError(std::string("creating topic ") + rd_kafka_topic_result_name(res[i]), e);
      }
    }
  }
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_AdminOptions_destroy(opts);
  rd_kafka_NewTopic_destroy_array(news.data(), news.size());
  rd_kafka_queue_destroy(q);
  return s;
}

Status EnsureTopic(const BusConfig& config, const std::string& topic, std::chrono::milliseconds timeout) {
  Conf conf(config);
  Status s;
  // A producer's metadata request asks the broker to create a missing
  // topic where it allows that (the embedded broker does; it has no
  // CreateTopics), so this works on both.
  rd_kafka_t* rk = conf.Create(RD_KAFKA_PRODUCER, &s);
  if (!s.ok()) return s;
  std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t*)> guard(rk, rd_kafka_destroy);
  const auto until = std::chrono::steady_clock::now() + timeout;
  bool asked = false;
  for (;;) {
    const int left = static_cast<int>(std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now())
               .count()));
    int partitions = 0;
    if (PartitionCount(rk, topic, std::min(left, 2000), &partitions).ok()) return Status::Ok();
    if (!asked) {
      asked = true;
      rd_kafka_NewTopic_t* nt =
          rd_kafka_NewTopic_new(topic.c_str(), PartitionsOf(config, topic), -1, nullptr, 0);
      rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
      rd_kafka_CreateTopics(rk, &nt, 1, nullptr, q);
      if (rd_kafka_event_t* ev = rd_kafka_queue_poll(q, std::min(left, 5000))) rd_kafka_event_destroy(ev);
      rd_kafka_queue_destroy(q);
      rd_kafka_NewTopic_destroy(nt);
    }
    if (std::chrono::steady_clock::now() >= until) {
      return Status::Error(errc::kKafka, "topic " + topic + " does not exist and could not be created");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status ListTopics(const BusConfig& config, const std::string& prefix, std::chrono::milliseconds timeout,
                  std::vector<std::string>* out) {
  Conf conf(config);
  Status s;
  rd_kafka_t* rk = conf.Create(RD_KAFKA_PRODUCER, &s);
  if (!s.ok()) return s;
  std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t*)> guard(rk, rd_kafka_destroy);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, nullptr, &md, static_cast<int>(timeout.count()));
  if (err) return KafkaError("reading topic metadata from " + config.brokers, err);
  for (int i = 0; i < md->topic_cnt; ++i) {
    const std::string name = md->topics[i].topic;
    if (md->topics[i].err == RD_KAFKA_RESP_ERR_NO_ERROR && name.compare(0, prefix.size(), prefix) == 0) {
      out->push_back(name);
    }
  }
  rd_kafka_metadata_destroy(md);
  std::sort(out->begin(), out->end());
  return Status::Ok();
}

// ---------------------------------------------------------------- producer

struct Producer::DeliveryState {
  std::mutex mu;
  std::string first_error;  // guarded by mu
  size_t failed = 0;        // guarded by mu
};

namespace {
void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) return;
  auto* d = static_cast<Producer::DeliveryState*>(opaque);
  std::lock_guard<std::mutex> lock(d->mu);
  if (d->failed++ == 0) {
    d->first_error =
        std::string("delivery to ") + rd_kafka_topic_name(m->rkt) + " failed: " + rd_kafka_err2str(m->err);
  }
}
}  // namespace

Status Producer::Open(const BusConfig& config, const std::string& transactional_id,
                      std::unique_ptr<Producer>* out) {
  std::unique_ptr<Producer> p(new Producer());
  p->delivery_ = std::make_unique<DeliveryState>();
  Conf conf(config);
  conf.Set("enable.idempotence", "true");
  conf.Set("acks", "all");
  conf.Set("partitioner", "murmur2_random");
  conf.Set("linger.ms", config.latency_first ? "0" : "2");
  // Room for every message the runner lets through (kMaxMessageBytes) plus
  // framing; BusConfig::extra may set another limit (a client of ours).
  if (auto m = config.extra.find("message.max.bytes"); m == config.extra.end()) {
    conf.Set("message.max.bytes", std::to_string(kMaxMessageBytes + 65536));
  } else {
    // librdkafka counts its record framing too: keep a margin below.
    const size_t set = static_cast<size_t>(std::strtoull(m->second.c_str(), nullptr, 10));
    p->max_message_bytes_ = std::min(kMaxMessageBytes, set > 4096 ? set - 4096 : 0);
  }
  if (!transactional_id.empty()) {
    conf.Set("transactional.id", transactional_id);
    conf.Set("transaction.timeout.ms", "60000");
  }
  rd_kafka_conf_set_dr_msg_cb(conf.get(), OnDelivery);
  rd_kafka_conf_set_opaque(conf.get(), p->delivery_.get());
  Status s;
  p->rk_ = conf.Create(RD_KAFKA_PRODUCER, &s);
  if (!s.ok()) return s;
  if (!transactional_id.empty()) {
    p->transactional_ = true;
    s = FromKafkaError("init transactions", rd_kafka_init_transactions(p->rk_, 30000));
    if (!s.ok()) return s;
  }
  *out = std::move(p);
  return Status::Ok();
}

Producer::~Producer() {
  if (rk_) {
    rd_kafka_flush(rk_, 5000);
    rd_kafka_destroy(rk_);
  }
}

Status Producer::Send(const Message& m) {
  for (int attempt = 0;; ++attempt) {
    rd_kafka_headers_t* hdrs = rd_kafka_headers_new(m.headers.size());
    for (const auto& [k, v] : m.headers) rd_kafka_header_add(hdrs, k.data(), k.size(), v.data(), v.size());
    rd_kafka_resp_err_t err =
        rd_kafka_producev(rk_, RD_KAFKA_V_TOPIC(m.topic.c_str()), RD_KAFKA_V_KEY(m.key.data(), m.key.size()),
                          RD_KAFKA_V_VALUE(const_cast<char*>(m.value.data()), m.value.size()),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) break;  // hdrs now owned by librdkafka
    rd_kafka_headers_destroy(hdrs);
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || attempt > 100)
      return KafkaError("produce to " + m.topic, err);
    rd_kafka_poll(rk_, 50);
  }
  rd_kafka_poll(rk_, 0);
  return Status::Ok();
}

Status Producer::Warm(const std::vector<std::string>& topics, std::chrono::milliseconds timeout) {
  for (const std::string& t : topics) {
    int partitions = 0;
    Status s = PartitionCount(rk_, t, static_cast<int>(timeout.count()), &partitions);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status Producer::Flush(std::chrono::milliseconds timeout) {
  rd_kafka_resp_err_t err = rd_kafka_flush(rk_, static_cast<int>(timeout.count()));
  if (err) return KafkaError("flush", err);
  std::lock_guard<std::mutex> lock(delivery_->mu);
  if (delivery_->failed) {
    Status s = Status::Error(errc::kKafka,
                             delivery_->first_error + " (" + std::to_string(delivery_->failed) + " failed)");
    delivery_->failed = 0;
    delivery_->first_error.clear();
    return s;
  }
  return Status::Ok();
}

Status Producer::BeginTransaction() {
  return FromKafkaError("begin transaction", rd_kafka_begin_transaction(rk_));
}

Status Producer::SendOffsets(const Consumer& consumer, const OffsetMap& next_offsets,
                             std::chrono::milliseconds timeout) {
  if (next_offsets.empty()) return Status::Ok();
  rd_kafka_topic_partition_list_t* list = ToList(next_offsets);
  rd_kafka_consumer_group_metadata_t* md = rd_kafka_consumer_group_metadata(consumer.rk_);
  Status s =
      FromKafkaError("send offsets to transaction",
                     rd_kafka_send_offsets_to_transaction(rk_, list, md, static_cast<int>(timeout.count())));
  rd_kafka_consumer_group_metadata_destroy(md);
  rd_kafka_topic_partition_list_destroy(list);
  return s;
}

Status Producer::CommitTransaction(std::chrono::milliseconds timeout) {
  Status s = FromKafkaError("commit transaction",
                            rd_kafka_commit_transaction(rk_, static_cast<int>(timeout.count())));
  std::lock_guard<std::mutex> lock(delivery_->mu);
  delivery_->failed = 0;  // a committed transaction delivered everything in it
  return s;
}

Status Producer::AbortTransaction(std::chrono::milliseconds timeout) {
  Status s =
      FromKafkaError("abort transaction", rd_kafka_abort_transaction(rk_, static_cast<int>(timeout.count())));
  std::lock_guard<std::mutex> lock(delivery_->mu);
  delivery_->failed = 0;
  return s;
}

// ---------------------------------------------------------------- consumer

void RunBeforeRevoke(Consumer* c) {
  if (c != nullptr && c->before_revoke_) c->before_revoke_();
}

std::vector<Consumer::PartitionLag> Consumer::Lag() const {
  std::vector<PartitionLag> out;
  if (rk_ == nullptr || closed_) return out;
  rd_kafka_topic_partition_list_t* parts = nullptr;
  if (rd_kafka_assignment(rk_, &parts) != RD_KAFKA_RESP_ERR_NO_ERROR || parts == nullptr) return out;
  rd_kafka_position(rk_, parts);
  for (int i = 0; i < parts->cnt; ++i) {
    const auto& p = parts->elems[i];
    int64_t low = 0, high = 0;
    if (p.offset < 0 || rd_kafka_get_watermark_offsets(rk_, p.topic, p.partition, &low, &high) != 0 ||
        high < 0) {
      continue;
    }
    out.push_back({p.topic, p.partition, std::max<int64_t>(0, high - p.offset)});
  }
  rd_kafka_topic_partition_list_destroy(parts);
  return out;
}

void RunBeforeAssign(Consumer* c) {
  if (c != nullptr && c->before_assign_) c->before_assign_();
}

void SetAssigned(Consumer* c, int partitions) {
  if (c != nullptr) c->assigned_ = partitions;
}

Status Consumer::Coverage(int* assigned, int* total, std::chrono::milliseconds timeout) const {
  *assigned = assigned_;
  *total = 0;
  for (const std::string& t : topics_) {
    int n = 0;
    Status s = PartitionCount(rk_, t, static_cast<int>(timeout.count()), &n);
    if (!s.ok()) return s;
    *total += n;
  }
  return Status::Ok();
}

namespace {

// Assignment: start every partition at its committed offset, or at the
// beginning for a group that never committed one. A committed offset the
// broker no longer holds is data lost before this group read it: reported.
void OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts,
                 void* opaque) {
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    rd_kafka_committed(rk, parts, 10000);
    for (int i = 0; i < parts->cnt; ++i) {
      auto& p = parts->elems[i];
      if (p.offset < 0) p.offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    SetAssigned(static_cast<Consumer*>(opaque), parts->cnt);
    RunBeforeAssign(static_cast<Consumer*>(opaque));
    rd_kafka_assign(rk, parts);
  } else {
    SetAssigned(static_cast<Consumer*>(opaque), 0);
    RunBeforeRevoke(static_cast<Consumer*>(opaque));
    rd_kafka_assign(rk, nullptr);
  }
}

}  // namespace

namespace {
// The settings every consumer of ours shares.
// BusConfig::extra is applied last: an operator's explicit setting wins.
void SetConsumerConf(Conf& conf, const BusConfig& config, const std::string& group) {
  conf.Set("group.id", group);
  conf.Set("enable.auto.commit", "false");
  conf.Set("enable.auto.offset.store", "false");
  conf.Set("isolation.level", "read_committed");
  // "error": an offset the broker no longer has is reported to us instead
  // of being silently reset (see Poll).
  conf.Set("auto.offset.reset", "error");
  conf.Set("session.timeout.ms", "6000");
  conf.Set("heartbeat.interval.ms", "1000");
  // How long the broker holds an empty fetch. Each request crosses three
  // topics, so this bounds its latency when traffic is light: 5 ms gave a
  // p50 of ~30 ms end to end (20 ms: ~62 ms) for ~12% of a core when idle
  // (20 ms: ~5%). BusConfig::extra overrides it.
  conf.Set("fetch.wait.max.ms", config.latency_first ? "1" : "5");
  // Oversized requests must reach the first stage to be rejected with a result: a
  // message larger than the fetch size would stall its partition.
  conf.Set("max.partition.fetch.bytes", "33554432");
  conf.Set("fetch.max.bytes", "67108864");
  conf.Set("receive.message.max.bytes", "134217728");
  for (const auto& [k, v] : config.extra) conf.Set(k, v);
}
}  // namespace

Status Consumer::Open(const BusConfig& config, const std::string& group,
                      const std::vector<std::string>& topics, std::unique_ptr<Consumer>* out) {
  std::unique_ptr<Consumer> c(new Consumer());
  Conf conf(config);
  SetConsumerConf(conf, config, group);
  rd_kafka_conf_set_rebalance_cb(conf.get(), OnRebalance);
  rd_kafka_conf_set_opaque(conf.get(), c.get());
  Status s;
  c->rk_ = conf.Create(RD_KAFKA_CONSUMER, &s);
  if (!s.ok()) return s;
  rd_kafka_poll_set_consumer(c->rk_);
  c->topics_ = topics;
  auto* list = rd_kafka_topic_partition_list_new(static_cast<int>(topics.size()));
  for (const auto& t : topics) rd_kafka_topic_partition_list_add(list, t.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_resp_err_t err = rd_kafka_subscribe(c->rk_, list);
  rd_kafka_topic_partition_list_destroy(list);
  if (err) return KafkaError("subscribe", err);
  *out = std::move(c);
  return Status::Ok();
}

Status Consumer::OpenTail(const BusConfig& config, const std::string& topic,
                          std::chrono::milliseconds timeout, std::unique_ptr<Consumer>* out) {
  return OpenTail(config, std::vector<std::string>{topic}, timeout, out);
}

Status Consumer::OpenTail(const BusConfig& config, const std::vector<std::string>& topics,
                          std::chrono::milliseconds timeout, std::unique_ptr<Consumer>* out) {
  std::unique_ptr<Consumer> c(new Consumer());
  Conf conf(config);
  SetConsumerConf(conf, config, "tollgate-tail");  // never joined: no subscribe, no commits
  Status s;
  c->rk_ = conf.Create(RD_KAFKA_CONSUMER, &s);
  if (!s.ok()) return s;
  rd_kafka_poll_set_consumer(c->rk_);
  std::vector<PartitionSpan> spans;
  s = ReadPartitionSpans(c->rk_, topics, static_cast<int>(timeout.count()), &spans);
  if (!s.ok()) return s;
  auto* list = rd_kafka_topic_partition_list_new(static_cast<int>(spans.size()));
  for (const auto& span : spans) {
    rd_kafka_topic_partition_list_add(list, span.topic.c_str(), span.partition)->offset = span.high;
  }
  rd_kafka_resp_err_t err = rd_kafka_assign(c->rk_, list);
  rd_kafka_topic_partition_list_destroy(list);
  if (err) return KafkaError("assign " + (topics.empty() ? std::string() : topics[0]), err);
  *out = std::move(c);
  return Status::Ok();
}

Consumer::~Consumer() {
  Close();
  if (rk_) rd_kafka_destroy(rk_);
}

void Consumer::Close() {
  if (rk_ && !closed_) {
    rd_kafka_consumer_close(rk_);
    closed_ = true;
  }
}

Status Consumer::Poll(size_t max, std::chrono::milliseconds timeout, std::vector<Message>* out) {
  Status result;
  auto wait = timeout;
  while (out->size() < max) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, static_cast<int>(wait.count()));
    if (m == nullptr) break;
    wait = std::chrono::milliseconds(0);
    if (m->err) {
      if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET && m->rkt) {
        // The offset we were to read from is gone (the broker dropped it, or
        // restarted empty). Say so, then go on from what the broker has.
        std::string topic = rd_kafka_topic_name(m->rkt);
        result =
            Status::Error(errc::kOffsetLost, "OFFSET LOST on " + topic + "[" + std::to_string(m->partition) +
                                                 "]: " + rd_kafka_message_errstr(m) +
                                                 "; continuing from the earliest offset the broker holds");
        // The partition is now in an error state where seek() is refused;
        // re-assigning it from the beginning (the others from where they
        // are) is what restarts its fetcher.
        // A partition with no position yet (nothing fetched since it was
        // assigned) keeps its start: the committed offset, else the
        // beginning. Re-assigning it "unset" would make it fail the same
        // way, and the partitions would knock each other back forever.
        rd_kafka_topic_partition_list_t* list = nullptr;
        if (rd_kafka_assignment(rk_, &list) == RD_KAFKA_RESP_ERR_NO_ERROR) {
          rd_kafka_topic_partition_list_t* committed = rd_kafka_topic_partition_list_copy(list);
          const bool have_committed = rd_kafka_committed(rk_, committed, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR;
          rd_kafka_position(rk_, list);
          for (int i = 0; i < list->cnt; ++i) {
            auto& p = list->elems[i];
            if (topic == p.topic && p.partition == m->partition) {
              p.offset = RD_KAFKA_OFFSET_BEGINNING;
            } else if (p.offset < 0) {
              const int64_t c = have_committed ? committed->elems[i].offset : -1;
              p.offset = c >= 0 ? c : RD_KAFKA_OFFSET_BEGINNING;
            }
          }
          rd_kafka_topic_partition_list_destroy(committed);
          rd_kafka_resp_err_t err = rd_kafka_assign(rk_, list);
          if (err)
            log::Warn({"consumer"}) << "re-assign after offset loss failed: " << rd_kafka_err2str(err)
                                    << "\n";
          rd_kafka_topic_partition_list_destroy(list);
        }
      } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && result.ok()) {
        // Transient errors (broker down, ...) are retried by librdkafka.
        log::Warn({"consumer"}) << rd_kafka_message_errstr(m) << "\n";
      }
      rd_kafka_message_destroy(m);
      continue;
    }
    Message msg = ToMessage(m);
    out->push_back(std::move(msg));
    rd_kafka_message_destroy(m);
  }
  return result;
}

Status Consumer::Commit(const OffsetMap& next_offsets, bool async) {
  if (next_offsets.empty()) return Status::Ok();
  auto* list = ToList(next_offsets);
  rd_kafka_resp_err_t err = rd_kafka_commit(rk_, list, async ? 1 : 0);
  rd_kafka_topic_partition_list_destroy(list);
  return err ? KafkaError("commit offsets", err) : Status::Ok();
}

Status ReadGroupOffsets(const BusConfig& config, const std::string& group,
                        const std::vector<std::string>& topics, std::chrono::milliseconds timeout,
                        OffsetMap* out) {
  const int ms = static_cast<int>(timeout.count());
  Conf conf(config);
  SetConsumerConf(conf, config, group);  // never subscribed: does not join the group
  Status created;
  rd_kafka_t* rk = conf.Create(RD_KAFKA_CONSUMER, &created);
  if (!created.ok()) return created;
  std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t*)> client(rk, rd_kafka_destroy);
  auto* list = rd_kafka_topic_partition_list_new(8);
  std::unique_ptr<rd_kafka_topic_partition_list_t, void (*)(rd_kafka_topic_partition_list_t*)> guard(
      list, rd_kafka_topic_partition_list_destroy);
  for (const auto& topic : topics) {
    int partitions = 0;
    Status s = PartitionCount(rk, topic, ms, &partitions);
    if (!s.ok()) return s;
    for (int32_t p = 0; p < partitions; ++p) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
  }
  rd_kafka_resp_err_t err = rd_kafka_committed(rk, list, ms);
  if (err) return KafkaError("committed offsets", err);
  out->clear();
  for (int i = 0; i < list->cnt; ++i) {
    if (list->elems[i].offset >= 0)
      (*out)[{list->elems[i].topic, list->elems[i].partition}] = list->elems[i].offset;
  }
  return Status::Ok();
}

Status Consumer::RewindToCommitted() {
  rd_kafka_topic_partition_list_t* parts = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_assignment(rk_, &parts);
  if (err) return KafkaError("assignment", err);
  err = rd_kafka_committed(rk_, parts, 10000);
  if (!err) {
    for (int i = 0; i < parts->cnt; ++i) {
      if (parts->elems[i].offset < 0) parts->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_error_t* e = rd_kafka_seek_partitions(rk_, parts, 10000);
    if (e) {
      Status s = FromKafkaError("rewind", e);
      rd_kafka_topic_partition_list_destroy(parts);
      return s;
    }
  }
  rd_kafka_topic_partition_list_destroy(parts);
  return err ? KafkaError("committed offsets", err) : Status::Ok();
}

// ---------------------------------------------------------------- tail reader

Status ReadCommittedTail(const BusConfig& config, const std::vector<std::string>& topics,
                         int64_t max_per_partition, std::chrono::milliseconds timeout,
                         const std::function<void(const Message&)>& each, TailReadStats* stats) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  const int ms = static_cast<int>(timeout.count());
  Conf conf(config);
  SetConsumerConf(conf, config, "tollgate-tail");  // never joined: no subscribe, no commits
  // Reaching a partition's end is what ends the read: read_committed stops
  // at the last stable offset, which may be short of the high watermark.
  conf.Set("enable.partition.eof", "true");
  Status s;
  rd_kafka_t* rk = conf.Create(RD_KAFKA_CONSUMER, &s);
  if (!s.ok()) return s;
  std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t*)> guard(rk, rd_kafka_destroy);
  rd_kafka_poll_set_consumer(rk);
  std::map<std::pair<std::string, int32_t>, int64_t> end;  // partitions still to read: their high watermark
  auto* list = rd_kafka_topic_partition_list_new(8);
  std::unique_ptr<rd_kafka_topic_partition_list_t, void (*)(rd_kafka_topic_partition_list_t*)> list_guard(
      list, rd_kafka_topic_partition_list_destroy);
  std::vector<PartitionSpan> spans;
  s = ReadPartitionSpans(rk, topics, ms, &spans);
  if (!s.ok()) return s;
  for (const auto& span : spans) {
    if (span.high <= span.low) continue;
    rd_kafka_topic_partition_list_add(list, span.topic.c_str(), span.partition)->offset =
        std::max(span.low, span.high - max_per_partition);
    end[{span.topic, span.partition}] = span.high;
  }
  TailReadStats local;
  TailReadStats& st = stats != nullptr ? *stats : local;
  st = TailReadStats{};
  st.partitions = end.size();
  if (end.empty()) {
    st.complete = true;
    return Status::Ok();
  }
  rd_kafka_resp_err_t err = rd_kafka_assign(rk, list);
  if (err) return KafkaError("assign for the tail read", err);
  while (!end.empty() && Clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (m == nullptr) continue;
    const std::pair<std::string, int32_t> tp{m->rkt ? rd_kafka_topic_name(m->rkt) : "", m->partition};
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      end.erase(tp);
    } else if (m->err) {
      // Transient errors are retried by librdkafka; an offset gone under
      // us leaves the partition unread (the deadline ends the read).
      log::Warn({"tail-reader"}) << rd_kafka_message_errstr(m) << "\n";
    } else {
      ++st.messages;
      each(ToMessage(m));
      auto it = end.find(tp);
      if (it != end.end() && m->offset + 1 >= it->second) end.erase(it);
    }
    rd_kafka_message_destroy(m);
  }
  st.complete = end.empty();
  rd_kafka_consumer_close(rk);
  return Status::Ok();
}

Status PartitionReader::Open(const BusConfig& config, const std::string& topic, int32_t partition,
                             int64_t from_offset, std::unique_ptr<PartitionReader>* out) {
  Conf conf(config);
  SetConsumerConf(conf, config, "tollgate-follower");  // never joined: assign only, no commits
  Status s;
  rd_kafka_t* rk = conf.Create(RD_KAFKA_CONSUMER, &s);
  if (!s.ok()) return s;
  rd_kafka_poll_set_consumer(rk);
  std::unique_ptr<PartitionReader> r(new PartitionReader());
  r->rk_ = rk;
  r->topic_ = topic;
  r->partition_ = partition;
  s = r->Seek(from_offset);
  if (!s.ok()) return s;
  *out = std::move(r);
  return Status::Ok();
}

PartitionReader::~PartitionReader() {
  if (rk_ == nullptr) return;
  rd_kafka_consumer_close(rk_);
  rd_kafka_destroy(rk_);
}

Status PartitionReader::Seek(int64_t offset) {
  auto* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic_.c_str(), partition_)->offset = offset;
  rd_kafka_resp_err_t err = rd_kafka_assign(rk_, list);
  rd_kafka_topic_partition_list_destroy(list);
  if (err) return KafkaError("assign " + topic_, err);
  next_ = offset;
  return Status::Ok();
}

Status PartitionReader::ReadToEnd(std::chrono::milliseconds timeout,
                                  const std::function<Status(const Message&)>& each) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  // The end as of now. A read_committed client's ListOffsets asks for the
  // last stable offset: an open transaction's messages are past it.
  int64_t low = 0, high = 0;
  rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(rk_, topic_.c_str(), partition_, &low, &high,
                                                             static_cast<int>(timeout.count()));
  if (err) return KafkaError("end offset of " + topic_, err);
  if (next_ < low) {
    return Status::Error(errc::kOffsetLost, "OFFSET LOST on " + topic_ + "[" + std::to_string(partition_) +
                                                "]: the next offset " + std::to_string(next_) +
                                                " is gone (the broker holds " + std::to_string(low) + " on)");
  }
  while (next_ < high) {
    if (Clock::now() >= deadline) {
      return Status::Error(errc::kKafka, "reading " + topic_ + " to offset " + std::to_string(high) +
                                             " timed out at " + std::to_string(next_));
    }
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, 50);
    if (m == nullptr) {
      // Aborted transactions' messages and control records are skipped
      // without a message: the position says how far the fetcher got.
      auto* list = rd_kafka_topic_partition_list_new(1);
      rd_kafka_topic_partition_list_add(list, topic_.c_str(), partition_);
      if (rd_kafka_position(rk_, list) == RD_KAFKA_RESP_ERR_NO_ERROR && list->elems[0].offset > next_) {
        next_ = list->elems[0].offset;
      }
      rd_kafka_topic_partition_list_destroy(list);
      continue;
    }
    std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> guard(m, rd_kafka_message_destroy);
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
    if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET) {
      return Status::Error(errc::kOffsetLost, "OFFSET LOST on " + topic_ + ": " + rd_kafka_message_errstr(m));
    }
    if (m->err) {
      log::Warn({"reader"}) << topic_ << ": " << rd_kafka_message_errstr(m) << "\n";
      continue;
    }
    if (m->offset < next_) continue;  // before a re-seek
    Status s = each(ToMessage(m));
    if (!s.ok()) {
      (void)Seek(m->offset);  // read it again next time
      return s;
    }
    next_ = m->offset + 1;
  }
  return Status::Ok();
}

}  // namespace tollgate
