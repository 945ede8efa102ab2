// Notify deliveries after the call ran (deploy/notify_deliveries.h).
#include "deploy/notify_deliveries.h"

#include <openssl/hmac.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/log.h"
#include "core/request_state.h"
#include "core/sha256.h"

namespace tollgate {
namespace {

constexpr uint64_t kRescanMargin = 4096;    // listeners may see groups slightly out of order
constexpr size_t kMaxArgsBytes = 16 << 10;  // of the args quoted in a webhook

std::string KeyOf(const std::string& org, const std::string& rid) { return Sha256Hex(org + '\0' + rid); }

std::string StatePath(const std::string& data_dir) { return data_dir + "/notify.state"; }

// The deliveries of a notify value (the object form, enabled), appended.
void AddDeliveries(const Json& notify, Json* out) {
  if (!notify.is_object() || !notify.value("enabled", true)) return;
  auto d = notify.find("deliveries");
  if (d == notify.end() || !d->is_array()) return;
  for (const auto& x : *d) {
    if (std::find(out->begin(), out->end(), x) == out->end()) out->push_back(x);
  }
}

// "${env:NAME}" -> the variable's value; false when unset or empty.
bool ExpandSecret(const std::string& ref, std::string* out) {
  if (ref.rfind("${env:", 0) != 0 || ref.back() != '}') return false;
  const char* v = std::getenv(ref.substr(6, ref.size() - 7).c_str());
  if (v == nullptr || *v == '\0') return false;
  *out = v;
  return true;
}

bool IsSlack(const Json& delivery) {
  const std::string fmt = delivery.value("format", "");
  if (!fmt.empty()) return fmt == "slack";
  return delivery.value("url", "").rfind("https://hooks.slack.com/", 0) == 0;
}

// Slack's mrkdwn needs & < > escaped.
std::string SlackEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out.push_back(c);
  }
  return out;
}

std::string Cut(std::string s, size_t n) {
  if (s.size() > n) s = s.substr(0, n - 3) + "...";
  return s;
}

}  // namespace

std::string NotifySignature(const std::string& secret, const std::string& timestamp,
                            const std::string& body) {
  const std::string msg = timestamp + "." + body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len);
  return ToHex(mac, len);
}

Status NotifyDefaultSecret(const std::string& data_dir, const std::string& derived_hex, std::string* out) {
  const std::string dir = data_dir + "/keys", path = dir + "/notify-webhook.secret";
  std::ifstream in(path);
  std::string s;
  if (in && std::getline(in, s) && s.size() >= 32) {
    *out = s;
    return Status::Ok();
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << derived_hex << "\n";
    if (!f) return Status::Error("E_IO", "cannot write " + tmp);
  }
  ::chmod(tmp.c_str(), 0600);
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Error("E_IO", "cannot write " + path + ": " + ec.message());
  *out = derived_hex;
  return Status::Ok();
}

NotifyDeliveries::NotifyDeliveries(NotifyOptions options) : options_(std::move(options)) {
  WebhookOptions w = options_.webhook;
  w.urls.clear();
  w.what = "notify webhook";
  w.log_stage = "notify";
  w.user_agent = "tollgate-notify/1";
  sender_ = std::make_unique<WebhookNotifier>(w);
}

NotifyDeliveries::~NotifyDeliveries() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  sender_.reset();  // its thread calls back into our counters
}

Status NotifyDeliveries::Start(NotifyOptions options, const LogStore& store, uint64_t head_seq,
                               std::unique_ptr<NotifyDeliveries>* out) {
  std::unique_ptr<NotifyDeliveries> n(new NotifyDeliveries(std::move(options)));
  // The state: "seen SEQ" and "claim SEQ KEY" lines, the last seen wins.
  std::vector<std::pair<uint64_t, std::string>> claims;
  std::error_code state_ec;
  const bool had_state = std::filesystem::exists(StatePath(n->options_.data_dir), state_ec);
  {
    std::ifstream in(StatePath(n->options_.data_dir));
    std::string word, key;
    uint64_t seq = 0;
    while (in >> word >> seq) {
      if (word == "seen")
        n->seen_ = std::max(n->seen_, seq);
      else if (word == "claim" && in >> key)
        claims.emplace_back(seq, key);
    }
  }
  const uint64_t from = n->seen_ > kRescanMargin ? n->seen_ - kRescanMargin : 0;
  for (const auto& [seq, key] : claims) {
    if (seq > from) n->claimed_.insert(key);
  }
  // Rewritten compact: what a rescan from `from` needs.
  {
    const std::string path = StatePath(n->options_.data_dir), tmp = path + ".tmp";
    std::ofstream f(tmp, std::ios::trunc);
    f << "seen " << n->seen_ << "\n";
    for (const auto& [seq, key] : claims) {
      if (seq > from) f << "claim " << seq << " " << key << "\n";
    }
    f.close();
    std::error_code ec;
    if (f) std::filesystem::rename(tmp, path, ec);
  }
  n->seen_written_ = n->seen_;
  n->thread_ = std::thread([raw = n.get()] { raw->Loop(); });
  // Completions a previous run did not deliver (bounded). Taking the past
  // as delivered, only the recent decisions are read: a call decided
  // before this start and completed after it is still delivered.
  const bool past_delivered = !had_state && !n->options_.catch_up_without_state;
  const uint64_t start = past_delivered
                             ? (head_seq > kRescanMargin ? head_seq - kRescanMargin + 1 : 1)
                             : std::max(from + 1, head_seq > kCatchUpEvents ? head_seq - kCatchUpEvents : 1);
  if (n->seen_ > 0 || head_seq > 0) {
    std::vector<Event> batch;
    for (uint64_t seq = start; seq <= head_seq; ++seq) {
      Event e;
      if (!store.ReadEvent(seq, &e).ok()) continue;
      if (e.type == ev::kDecisionMade || (e.type == ev::kExecutionCompleted && !past_delivered)) {
        batch.push_back(std::move(e));
      }
      if (batch.size() >= 256) {
        n->OnAppended(batch);
        batch.clear();
      }
    }
    if (!batch.empty()) n->OnAppended(batch);
    std::lock_guard<std::mutex> lock(n->mu_);
    n->NoteSeen(head_seq, true);  // the next start reads from here
  }
  *out = std::move(n);
  return Status::Ok();
}

bool NotifyDeliveries::Claim(const std::string& org, const std::string& rid, uint64_t seq) {
  const std::string key = KeyOf(org, rid);
  if (!claimed_.insert(key).second) return false;
  // Appended before anything is sent: a restart never sends it again.
  if (FILE* f = std::fopen(StatePath(options_.data_dir).c_str(), "a")) {
    std::fprintf(f, "claim %llu %s\n", static_cast<unsigned long long>(seq), key.c_str());
    std::fclose(f);
  }
  return true;
}

void NotifyDeliveries::NoteSeen(uint64_t seq, bool force) {
  seen_ = std::max(seen_, seq);
  if (seen_ == seen_written_ || (!force && seen_ < seen_written_ + 1000)) return;
  if (FILE* f = std::fopen(StatePath(options_.data_dir).c_str(), "a")) {
    std::fprintf(f, "seen %llu\n", static_cast<unsigned long long>(seen_));
    std::fclose(f);
    seen_written_ = seen_;
  }
}

void WriteNotifyMetrics(MetricsText& t, const NotifyDeliveries& n) {
  t.Family("tollgate_notify_deliveries_total", "counter",
           "Notify deliveries after a call ran, by type and outcome.");
  t.Sample("tollgate_notify_deliveries_total", {{"type", "log"}, {"outcome", "delivered"}},
           static_cast<double>(n.logged.load()));
  t.Sample("tollgate_notify_deliveries_total", {{"type", "webhook"}, {"outcome", "delivered"}},
           static_cast<double>(n.webhooks_delivered.load()));
  t.Sample("tollgate_notify_deliveries_total", {{"type", "webhook"}, {"outcome", "failed"}},
           static_cast<double>(n.webhooks_failed.load()));
  t.Sample("tollgate_notify_deliveries_total", {{"type", "any"}, {"outcome", "dropped"}},
           static_cast<double>(n.dropped.load()));
}

void NotifyDeliveries::OnAppended(const std::vector<Event>& events) {
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Event& e : events) {
      if (e.type == ev::kDecisionMade) {
        auto n = e.data.find("notify");
        if (n != e.data.end() && n->is_array() && !n->empty() && e.data.value("verdict", "") != "deny") {
          flagged_.insert(KeyOf(e.org_id, e.request_id));
        }
      } else if (e.type == ev::kExecutionCompleted && flagged_.count(KeyOf(e.org_id, e.request_id))) {
        if (!Claim(e.org_id, e.request_id, e.seq)) continue;
        if (queue_.size() >= options_.max_queue) {
          ++dropped;
          continue;
        }
        queue_.push_back({e.org_id, e.request_id, e.seq});
        queued = true;
      }
    }
    if (!events.empty()) NoteSeen(events.back().seq);
  }
  if (queued) cv_.notify_one();
}

void NotifyDeliveries::SetConsoleBase(const std::string& url) {
  std::lock_guard<std::mutex> lock(mu_);
  console_base_ = url;
}

void NotifyDeliveries::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void NotifyDeliveries::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    Deliver(job);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

// What every delivery of one call says.
struct NotifyDeliveries::Notice {
  const Event* completed = nullptr;  // the call's execution.completed
  Json body;                         // the webhook body
  std::string summary;               // one line, for the log and Slack
  std::string console;               // a link to the request, or empty
  std::string ts;                    // the signed timestamp, in seconds
};

// The deliveries of the policy in force for this org and agent.
Json NotifyDeliveries::DeliveriesOf(const std::string& org, const std::string& agent_id) const {
  Json deliveries = Json::array();
  if (options_.policy) {
    const PolicyInForce pif = options_.policy();
    if (pif.has_policy()) {
      const Json eff = pif.file()->EffectiveDoc(org);
      AddDeliveries(eff.value("notify", Json()), &deliveries);
      if (auto a = eff.find("agents"); a != eff.end() && a->is_object() && a->contains(agent_id)) {
        AddDeliveries((*a)[agent_id].value("notify", Json()), &deliveries);
      }
    }
  }
  return deliveries;
}

// The body, summary and console link every delivery of the call shares.
NotifyDeliveries::Notice NotifyDeliveries::MakeNotice(const Job& job, const RequestState& st) {
  const Json& d = st.decision->data;
  const Event& c = *st.completed;
  Notice n;
  n.completed = &c;
  const Json result = c.data.value("result", Json::object());
  const bool success = result.is_object() && result.value("success", false);
  std::string error_code;
  if (auto err = result.find("error"); err != result.end() && err->is_object())
    error_code = err->value("code", "");
  Json args = Json::object();
  if (st.received != nullptr)
    args = st.received->data.value("request", Json::object()).value("args", Json::object());
  if (args.dump().size() > kMaxArgsBytes) args = Json{{"truncated", true}};
  std::string& console = n.console;
  {
    std::lock_guard<std::mutex> lock(mu_);
    console = console_base_;
  }
  if (!console.empty()) console += "/#/session/" + c.session_id + "?request=" + job.request_id;
  n.body = Json{{"event", "tool.notify"},
                {"org_id", job.org},
                {"agent_id", c.agent_id},
                {"session_id", c.session_id},
                {"request_id", job.request_id},
                {"tool", c.tool},
                {"invocation", d.value("invocation", "")},
                {"args", args},
                {"verdict", d.value("verdict", "")},
                {"rule", d.value("rule", "")},
                {"notify", d.value("notify", Json::array())},
                {"status", success ? "succeeded" : "failed"},
                {"error_code", error_code.empty() ? Json() : Json(error_code)},
                {"log_seq", c.seq},
                {"console_url", console.empty() ? Json() : Json(console)}};
  n.summary = "agent " + c.agent_id + " (org " + job.org + ") ran " +
              Cut(d.value("invocation", c.tool), 300) + ": " + (success ? "succeeded" : "failed") +
              (error_code.empty() ? "" : " (" + error_code + ")") + "; verdict " + d.value("verdict", "") +
              ", notify " + d.value("notify", Json::array()).dump();
  n.ts = std::to_string(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  return n;
}

// Delivery `i` (a webhook): signed with its secret, queued to the sender.
void NotifyDeliveries::SendWebhook(const Json& del, size_t i, const Job& job, const Notice& n) {
  const Event& c = *n.completed;
  const std::string& console = n.console;
  const std::string& ts = n.ts;
  std::string secret = options_.default_secret;
  if (del.contains("secret") && !ExpandSecret(del.value("secret", ""), &secret)) {
    log::Warn({"notify", job.request_id, c.session_id})
        << "notify webhook " << del.value("url", "") << " not sent: " << del.value("secret", "")
        << " is not set in tollgate's environment\n";
    ++webhooks_failed;
    return;
  }
  if (secret.empty()) {
    ++webhooks_failed;
    return;
  }
  Json payload = n.body;
  payload["delivery_id"] =
      Sha256Hex(job.org + '\0' + job.request_id + '\0' + std::to_string(i)).substr(0, 32);
  if (IsSlack(del)) {
    const std::string text = ":bell: tollgate: " + SlackEscape(n.summary);
    std::string ctx =
        "request `" + SlackEscape(job.request_id) + "`, session `" + SlackEscape(c.session_id) + "`";
    if (!console.empty()) ctx += " · <" + console + "|open in the console>";
    payload = Json{
        {"text", text},
        {"blocks", Json::array({Json{{"type", "section"}, {"text", {{"type", "mrkdwn"}, {"text", text}}}},
                                Json{{"type", "context"},
                                     {"elements", Json::array({{{"type", "mrkdwn"}, {"text", ctx}}})}}})}};
  }
  std::string text = payload.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::vector<std::string> headers{
      "X-Tollgate-Timestamp: " + ts, "X-Tollgate-Signature: sha256=" + NotifySignature(secret, ts, text),
      "X-Tollgate-Delivery: " +
          Sha256Hex(job.org + '\0' + job.request_id + '\0' + std::to_string(i)).substr(0, 32)};
  const bool queued =
      sender_->EnqueueTo(del.value("url", ""), std::move(text), std::move(headers), [this](bool ok) {
        if (ok)
          ++webhooks_delivered;
        else
          ++webhooks_failed;
      });
  if (!queued) ++dropped;
}

void NotifyDeliveries::Deliver(const Job& job) {
  std::vector<Event> history;
  if (options_.view == nullptr || !options_.view->EventsOfRequest(job.org, job.request_id, &history).ok())
    return;
  const RequestState st = Summarize(history);
  if (st.decision == nullptr || st.completed == nullptr) return;
  const Event& c = *st.completed;
  Json deliveries = DeliveriesOf(job.org, c.agent_id);
  if (deliveries.empty()) return;
  const Notice n = MakeNotice(job, st);
  for (size_t i = 0; i < deliveries.size(); ++i) {
    const Json& del = deliveries[i];
    const std::string type = del.value("type", "");
    if (type == "log") {
      log::Info({"notify", job.request_id, c.session_id}) << "notify: " << n.summary << "\n";
      ++logged;
      continue;
    }
    if (type != "webhook") continue;
    SendWebhook(del, i, job, n);
  }
}

}  // namespace tollgate
