#include "decide/policy_watch.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/log.h"
#include "core/sha256.h"
#include "decide/duragent_policy.h"

namespace tollgate {

namespace {

// "LINE:COL: message", or the message when it has no place.
std::string Placed(const PolicyProblem& p) {
  if (p.line <= 0) return p.message;
  return std::to_string(p.line) + ":" + std::to_string(p.column) + ": " + p.message;
}

// A refusal's problems as the event and /healthz carry them: the first
// `n`, each message bounded (a message may quote a long glob).
Json ProblemsJson(const std::vector<PolicyProblem>& problems, size_t n, bool placed_text) {
  Json out = Json::array();
  for (size_t i = 0; i < problems.size() && i < n; ++i) {
    const PolicyProblem& p = problems[i];
    std::string message = ToValidUtf8(placed_text ? Placed(p) : p.message);
    if (message.size() > 1000) message = ToValidUtf8(message.substr(0, 997)) + "...";
    if (placed_text) {
      out.push_back(message);
      continue;
    }
    Json e{{"message", message}};
    if (p.line > 0) e["line"] = p.line;
    if (p.column > 0) e["column"] = p.column;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<PolicyProblem> ProblemOf(const Status& s) { return {PolicyProblem{0, 0, s.message()}}; }

}  // namespace

void PolicyFileWatch::Refused(std::vector<PolicyProblem> problems, const PolicyInForce& in_force) {
  policy_ = nullptr;
  error_ = Placed(problems.front());
  if (problems.size() > 1) error_ += " (and " + std::to_string(problems.size() - 1) + " more)";
  auto report = log::Error({"decide"});
  report << "policy file refused: " << path_ << ":";
  for (const PolicyProblem& p : problems) report << "\n  " << Placed(p);
  report << (in_force.has_policy() ? "\nthe policy in force stays (" + in_force.version() + ")"
                                   : std::string("\nno policy in force"))
         << "\n";
  refusal_ = Refusal{bytes_hash_, std::move(problems), NowMicros()};
  refusal_logged_ = false;
}

void PolicyFileWatch::Adopt(std::vector<PolicyProblem> problems, PolicyPtr p, const PolicyInForce& in_force) {
  if (problems.empty() && validate_) {
    if (Status s = validate_(p->doc()); !s.ok()) problems = ProblemOf(s);
  }
  if (problems.empty()) {
    policy_ = std::move(p);
    error_.clear();
    return;
  }
  Refused(std::move(problems), in_force);
}

std::optional<Event> PolicyFileWatch::TakeRefusedEvent(const PolicyInForce& in_force, int64_t now_us) {
  if (refusal_logged_ || !refusal_) return std::nullopt;
  refusal_logged_ = true;
  const std::string in_force_hash = in_force.has_policy() ? in_force.file()->content_hash() : "";
  Event e;
  e.type = ev::kPolicyRefused;
  e.id = MakeEventId(e.type, "", "file:" + refusal_->file_sha256 + ":" + in_force_hash);
  e.time_us = now_us;
  e.org_id = kAllOrgs;
  e.data = {{"source", path_},
            {"file_sha256", refusal_->file_sha256},
            {"errors", ProblemsJson(refusal_->problems, 20, false)},
            {"errors_total", refusal_->problems.size()}};
  if (in_force.has_policy()) {
    e.data["in_force_version"] = in_force.version();
    e.data["in_force_content_hash"] = in_force_hash;
  }
  return e;
}

Json PolicyFileWatch::Health(const PolicyInForce& in_force) const {
  Json out{{"in_force", nullptr}};
  if (in_force.has_policy()) {
    out["in_force"] = {{"version", in_force.version()}, {"content_hash", in_force.file()->content_hash()}};
  }
  const bool current = policy_ != nullptr && in_force.has_policy() &&
                       in_force.file()->content_hash() == policy_->content_hash();
  out["file"] = path_.empty()        ? "none"
                : policy_ != nullptr ? (current ? "in_force" : "pending")
                : missing_           ? "missing"
                : !error_.empty()    ? "refused"
                                     : "pending";  // not looked at yet
  if (refusal_) {
    out["last_refused"] = {{"source", path_},
                           {"file_sha256", refusal_->file_sha256},
                           {"time", FormatTime(refusal_->time_us)},
                           {"errors", ProblemsJson(refusal_->problems, 5, true)},
                           {"errors_total", refusal_->problems.size()}};
  }
  return out;
}

// A Duragent workspace: every file of the layout is stat'ed; when any
// changed (or appeared, or went), all are read and hashed, and loaded when
// the bytes differ.
void PolicyFileWatch::PollLayout(const PolicyInForce& in_force) {
  std::string stamp;
  const std::vector<std::string> files = DuragentLayoutFiles(path_);
  for (const auto& f : files) {
    struct stat st {};
    stamp += f;
    stamp += ::stat(f.c_str(), &st) != 0
                 ? std::string("|-\n")
                 : "|" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "|" +
                       std::to_string(st.st_size) + "\n";
  }
  if (stamp == layout_stamp_) return;
  layout_stamp_ = stamp;
  std::string all;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    if (in) ss << in.rdbuf();
    all += Sha256Hex(f) + (in ? Sha256Hex(ss.str()) : std::string("-"));
  }
  const std::string h = Sha256Hex(all);
  if (h == bytes_hash_) return;
  bytes_hash_ = h;
  PolicyPtr p;
  Status s = LoadDuragentLayout(path_, &p);
  Adopt(s.ok() ? std::vector<PolicyProblem>{} : ProblemOf(s), std::move(p), in_force);
}

void PolicyFileWatch::Poll(const PolicyInForce& in_force) {
  if (path_.empty()) return;
  if (std::error_code ec; std::filesystem::is_directory(path_, ec)) return PollLayout(in_force);
  struct stat st {};
  missing_ = ::stat(path_.c_str(), &st) != 0;
  if (missing_) {
    if (error_.empty()) {
      error_ = "cannot read policy file '" + path_ + "'";
      log::Error({"decide"}) << error_
                             << (in_force.has_policy() ? "; the policy in force stays"
                                                       : "; no policy in force")
                             << "\n";
    }
    mtime_ns_ = size_ = -1;
    return;
  }
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (mtime == mtime_ns_ && st.st_size == size_) return;
  mtime_ns_ = mtime;
  size_ = st.st_size;
  std::ifstream f(path_, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  // Touched but not edited (same bytes): nothing to load.
  const std::string h = Sha256Hex(text);
  if (h == bytes_hash_) return;
  bytes_hash_ = h;
  // An empty file is a write in progress (`>` or an editor truncates
  // first), never a policy to put in force: it would allow by default.
  PolicyPtr p;
  std::vector<PolicyProblem> problems =
      text.find_first_not_of(" \t\r\n") == std::string::npos
          ? ProblemOf(Status::Error(errc::kPolicyInvalid, "the policy file is empty"))
          : CheckPolicyYaml(text, path_, &p);
  Adopt(std::move(problems), std::move(p), in_force);
}

}  // namespace tollgate
