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

void PolicyFileWatch::Refused(const Status& s, const PolicyInForce& in_force) {
  policy_ = nullptr;
  error_ = s.message();
  log::Error({"decide"}) << "policy file refused: " << path_ << ": " << s.message()
                         << (in_force.has_policy()
                                 ? "; the policy in force stays (" + in_force.version() + ")"
                                 : std::string("; no policy in force"))
                         << "\n";
}

void PolicyFileWatch::Adopt(Status s, PolicyPtr p, const PolicyInForce& in_force) {
  if (s.ok() && validate_) s = validate_(p->doc());
  if (s.ok()) {
    policy_ = std::move(p);
    error_.clear();
    return;
  }
  Refused(s, in_force);
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
  Adopt(s, std::move(p), in_force);
}

void PolicyFileWatch::Poll(const PolicyInForce& in_force) {
  if (path_.empty()) return;
  if (std::error_code ec; std::filesystem::is_directory(path_, ec)) return PollLayout(in_force);
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
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
  Status s = text.find_first_not_of(" \t\r\n") == std::string::npos
                 ? Status::Error(errc::kPolicyInvalid, "the policy file is empty")
                 : LoadPolicyYaml(text, path_, &p);
  Adopt(s, std::move(p), in_force);
}

}  // namespace tollgate
