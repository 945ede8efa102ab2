#include "observe/webhook.h"

#include <curl/curl.h>

#include <iostream>

#include "core/log.h"

namespace tollgate {
namespace {

std::once_flag curl_once;

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

}  // namespace

WebhookNotifier::WebhookNotifier(WebhookOptions options) : options_(std::move(options)) {
  std::call_once(curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  thread_ = std::thread([this] { Loop(); });
}

WebhookNotifier::~WebhookNotifier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    dropped += queue_.size();
    queue_.clear();
  }
  cv_.notify_all();
  thread_.join();
}

bool WebhookNotifier::Enqueue(const Json& body) {
  const std::string text = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  bool all = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& url : options_.urls) {
      if (queue_.size() >= options_.max_queue) {
        ++dropped;
        all = false;
        continue;
      }
      queue_.push_back({url, text, {}, nullptr});
    }
  }
  cv_.notify_one();
  return all;
}

bool WebhookNotifier::EnqueueTo(const std::string& url, std::string body, std::vector<std::string> headers,
                                std::function<void(bool ok)> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= options_.max_queue) {
      ++dropped;
      return false;
    }
    queue_.push_back({url, std::move(body), std::move(headers), std::move(done)});
  }
  cv_.notify_one();
  return true;
}

bool WebhookNotifier::Post(const Delivery& d, std::string* error) {
  CURL* curl = curl_easy_init();
  if (!curl) {
    *error = "curl_easy_init failed";
    return false;
  }
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  headers = curl_slist_append(headers, ("User-Agent: " + options_.user_agent).c_str());
  for (const auto& h : d.headers) headers = curl_slist_append(headers, h.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, d.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, d.body.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(d.body.size()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, options_.timeout_ms);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // a background thread: no SIGALRM
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Discard);
  CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) {
    *error = curl_easy_strerror(rc);
    return false;
  }
  if (status < 200 || status >= 300) {
    *error = "HTTP " + std::to_string(status);
    return false;
  }
  return true;
}

void WebhookNotifier::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Delivery d = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    auto backoff = options_.first_backoff;
    std::string error;
    bool ok = false;
    for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
      ++attempts;
      if (Post(d, &error)) {
        ok = true;
        break;
      }
      if (attempt == options_.max_attempts) break;
      std::unique_lock<std::mutex> wait(mu_);
      if (cv_.wait_for(wait, backoff, [this] { return stopping_; })) break;
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
    if (d.done) d.done(ok);
    if (ok) {
      ++delivered;
    } else {
      ++failed;
      log::Warn({options_.log_stage}) << options_.what << " " << d.url << " not delivered after "
                                      << options_.max_attempts << " attempts: " << error << "\n";
    }
    lock.lock();
  }
}

}  // namespace tollgate
