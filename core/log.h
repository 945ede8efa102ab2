// Structured logs (docs/operations.md, "Logs"): one JSON object per line on
// stderr, {"ts", "level", "stage", "request_id"?, "session_id"?, "msg"},
// or a plain line for people (`--log-format text`). spdlog writes them:
// thread-safe, one whole line per call, whatever thread logs. Messages are
// ours; agent-supplied text in them (ids, reasons) is escaped as JSON, and
// control characters are escaped in text lines too, so nothing an agent
// sends can forge a line.
#pragma once

#include <sstream>
#include <string>

namespace tollgate::log {

enum class Format { kJson, kText };
// Process-wide; the default is JSON. Call before the stages start.
void SetFormat(Format f);
// "json" or "text"; false for anything else.
bool ParseFormat(const std::string& name, Format* out);

struct Fields {
  std::string stage;       // e.g. "decide", "pipeline"
  std::string request_id;  // "" when not about one request
  std::string session_id;
};

void Info(const Fields& f, const std::string& msg);
void Warn(const Fields& f, const std::string& msg);
void Error(const Fields& f, const std::string& msg);

// A line built with <<, written when it goes out of scope (a trailing
// newline is dropped): log::Warn({"decide"}) << "took " << ms << " ms";
enum class Level { kInfo, kWarn, kError };
class Line {
 public:
  Line(Level level, Fields f) : level_(level), fields_(std::move(f)) {}
  ~Line();
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;
  template <typename T>
  Line& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  Level level_;
  Fields fields_;
  std::ostringstream os_;
};
inline Line Info(Fields f) { return Line(Level::kInfo, std::move(f)); }
inline Line Warn(Fields f) { return Line(Level::kWarn, std::move(f)); }
inline Line Error(Fields f) { return Line(Level::kError, std::move(f)); }

}  // namespace tollgate::log
