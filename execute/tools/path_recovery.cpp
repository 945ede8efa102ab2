#include "execute/tools/path_recovery.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <set>

#include "core/url.h"
#include "execute/tools/file_common.h"

namespace tollgate {
namespace {

std::vector<std::string> Split(const std::string& norm) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < norm.size()) {
    size_t end = norm.find('/', start);
    if (end == std::string::npos) end = norm.size();
    if (end > start) out.push_back(norm.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string Join(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += (i ? "/" : "") + parts[i];
  return out;
}

// The names in the directory `rel` beneath the workspace (sorted), each
// with its type (lstat: a symlink is neither followed nor
// counted as a file or directory). Stops once *reads (names read so far,
// kept or not) reaches `cap`. False when it cannot be opened.
struct Entry {
  std::string name;
  bool dir = false;
  bool file = false;
};
bool ReadDir(const Workspace& ws, const std::string& rel, size_t cap, std::vector<Entry>* out,
             size_t* reads) {
  out->clear();
  int fd = -1;
  // Beneath the workspace (a link inside may lead to `rel`, never out of it).
  if (!OpenBeneathFd(ws.fd(), rel.empty() ? "." : rel, O_RDONLY | O_DIRECTORY, 0, &fd).ok()) return false;
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    return false;
  }
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (*reads >= cap) break;  // every name counts, kept or not
    ++*reads;
    struct stat st {};
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (ToValidUtf8(n) != n) continue;  // a name the agent could not send back
    out->push_back({n, S_ISDIR(st.st_mode), S_ISREG(st.st_mode)});
  }
  closedir(d);
  std::sort(out->begin(), out->end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return true;
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Levenshtein distance, or 3 when it is more than 2 (or the names are long).
int EditDistanceUpTo2(const std::string& a, const std::string& b) {
  if (a.size() > 64 || b.size() > 64) return 3;
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > 2) return 3;
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return std::min(prev[b.size()], 3);
}

std::string Stem(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
}

Json NotFound(const char* code, const std::string& message, const std::string& missing,
              std::vector<std::string> suggestions) {
  Json r = ToolResultError(code, message, true);
  r["error"]["missing"] = missing;
  r["error"]["suggestions"] = std::move(suggestions);
  return r;
}

}  // namespace

std::vector<std::string> RecoverySuggestions(const Workspace& ws, const std::string& missing, bool want_dir) {
  std::vector<std::string> out;
  const std::vector<std::string> parts = Split(missing);
  if (parts.empty()) return out;
  const std::string& name = parts.back();
  const std::string parent = Join(parts, parts.size() - 1);
  auto fits = [&](const Entry& e) { return want_dir ? e.dir : e.file; };
  std::set<std::string> seen{missing};
  auto add = [&](const std::string& p) {
    if (out.size() < kMaxSuggestions && seen.insert(p).second) out.push_back(p);
  };

  // 1. The same name elsewhere, breadth first (shallowest first).
  std::deque<std::pair<std::string, int>> dirs{{"", 0}};
  size_t scanned = 0;
  std::vector<Entry> entries;
  while (!dirs.empty() && out.size() < kMaxSuggestions && scanned < kMaxSuggestScan) {
    auto [dir, depth] = dirs.front();
    dirs.pop_front();
    if (!ReadDir(ws, dir, kMaxSuggestScan, &entries, &scanned)) continue;
    for (const Entry& e : entries) {
      const std::string rel = dir.empty() ? e.name : dir + "/" + e.name;
      if (e.name == name && fits(e)) add(rel);
      if (e.dir && depth + 1 < kSuggestDepth) dirs.emplace_back(rel, depth + 1);
    }
  }

  // 2. A typo away in the parent directory.
  size_t parent_reads = 0;
  if (out.size() < kMaxSuggestions && ReadDir(ws, parent, 1000, &entries, &parent_reads)) {
    std::vector<std::pair<int, std::string>> near;
    const std::string lower = Lower(name);
    for (const Entry& e : entries) {
      if (!fits(e) || e.name == name) continue;
      int score = 3;
      if (Lower(e.name) == lower) {
        score = 0;
      } else if (int d = EditDistanceUpTo2(lower, Lower(e.name)); d <= 2) {
        score = d;
      } else if (!want_dir && Stem(e.name) == Stem(name) && Stem(name) != name) {
        score = 2;
      }
      if (score <= 2) near.emplace_back(score, e.name);
    }
    std::stable_sort(near.begin(), near.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [score, n] : near) add(parent.empty() ? n : parent + "/" + n);
  }
  return out;
}

Json FailPath(const Workspace& ws, const std::string& rel, const Status& s, bool want_dir,
              const char* io_code) {
  if (s.code() != errc::kFileNotFound && s.code() != errc::kPathNotFound) {
    if (io_code != nullptr && s.code() == errc::kToolExec) return ToolFail(io_code, s.message());
    return FailFrom(s);
  }
  const std::string norm = NormalizePath(rel);
  const std::vector<std::string> parts = Split(norm);
  if (norm.empty() || norm[0] == '/' || parts.empty() || parts[0] == ".." ||
      parts.size() > kMaxPathComponents) {
    return FailFrom(s);
  }
  // The first prefix that is not there (or not a directory).
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string prefix = Join(parts, i + 1);
    const bool last = i + 1 == parts.size();
    int fd = -1;
    Status o = OpenBeneathFd(ws.fd(), prefix, O_PATH, 0, &fd);
    if (o.ok()) {
      struct stat st {};
      const bool dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
      close(fd);
      if (dir) continue;
      if (!last) {
        return NotFound(errc::kPathNotFound,
                        "Path not found: " + prefix + " is a file, not a directory (in " + norm + ")", prefix,
                        RecoverySuggestions(ws, prefix, true));
      }
      // The path is there but is a file: listing or searching it is that
      // tool's own error (the seed's E_LIST_ERROR / E_SEARCH_ERROR), nothing
      // to recover by looking elsewhere.
      if (want_dir && io_code != nullptr) return ToolFail(io_code, prefix + " is a file, not a directory");
      if (want_dir) {
        return NotFound(errc::kDirNotFound, "Directory not found: " + prefix + " is not a directory", prefix,
                        RecoverySuggestions(ws, prefix, true));
      }
      return FailFrom(s);  // it is there now
    }
    if (o.code() == errc::kPathNotFound) {  // a symlink on the way to a file
      return NotFound(errc::kPathNotFound, "Path not found: " + prefix + " (in " + norm + ")", prefix, {});
    }
    if (o.code() != errc::kFileNotFound) return FailFrom(s);
    if (last && !want_dir) {
      return NotFound(errc::kFileNotFound, "File not found: " + norm, prefix,
                      RecoverySuggestions(ws, prefix, false));
    }
    return NotFound(errc::kDirNotFound, "Directory not found: " + prefix, prefix,
                    RecoverySuggestions(ws, prefix, true));
  }
  return FailFrom(s);
}

}  // namespace tollgate
