#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <ctime>

#include "core/canonical_json.h"

namespace tollgate::log {
namespace {

std::atomic<Format> g_format{Format::kJson};

spdlog::logger& Logger() {
  // The message is the whole line: JSON or text is made here.
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>("tollgate", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("%v");
    l->set_level(spdlog::level::info);
    l->flush_on(spdlog::level::info);
    return l;
  }();
  return *logger;
}

std::string Now() {
  const auto now = std::chrono::system_clock::now();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(us % 1'000'000));
  return buf;
}

// Text lines keep one line each: control characters become \xNN.
std::string Plain(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void Write(spdlog::level::level_enum level, const char* name, const Fields& f, const std::string& msg) {
  std::string line;
  if (g_format.load() == Format::kJson) {
    Json j{{"ts", Now()}, {"level", name}, {"stage", f.stage}};
    if (!f.request_id.empty()) j["request_id"] = f.request_id;
    if (!f.session_id.empty()) j["session_id"] = f.session_id;
    j["msg"] = msg;
    line = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  } else {
    line = "tollgate: " + (f.stage.empty() ? std::string() : Plain(f.stage) + ": ") +
           (f.request_id.empty() ? std::string() : "[" + Plain(f.request_id) + "] ") + Plain(msg);
  }
  Logger().log(level, line);
}

}  // namespace

void SetFormat(Format f) { g_format.store(f); }

bool ParseFormat(const std::string& name, Format* out) {
  if (name == "json")
    *out = Format::kJson;
  else if (name == "text")
    *out = Format::kText;
  else
    return false;
  return true;
}

Line::~Line() {
  std::string msg = os_.str();
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  switch (level_) {
    case Level::kInfo:
      Info(fields_, msg);
      break;
    case Level::kWarn:
      Warn(fields_, msg);
      break;
    case Level::kError:
      Error(fields_, msg);
      break;
  }
}

void Info(const Fields& f, const std::string& msg) { Write(spdlog::level::info, "info", f, msg); }
void Warn(const Fields& f, const std::string& msg) { Write(spdlog::level::warn, "warn", f, msg); }
void Error(const Fields& f, const std::string& msg) { Write(spdlog::level::err, "error", f, msg); }

}  // namespace tollgate::log
