#include "execute/uid_table.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "execute/tool.h"

namespace tollgate {
namespace {

constexpr size_t kMaxLine = 65536;

std::string Escape(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

bool Unescape(const std::string& s, std::string* key) {
  key->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      *key += s[i];
      continue;
    }
    if (++i == s.size()) return false;
    if (s[i] == '\\') {
      *key += '\\';
    } else if (s[i] == 'n') {
      *key += '\n';
    } else {
      return false;
    }
  }
  return !key->empty();
}

// Whether a passwd entry (local or NSS) names `uid`: such a uid is a real
// user's, whose processes and files a sandbox must not share.
bool Named(uid_t uid) {
  passwd pw{}, *found = nullptr;
  char buf[4096];
  return getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr;
}

Status Fail(const std::string& path, const std::string& what) {
  return Status::Error(errc::kSandbox, "sandbox uid table " + path + ": " + what);
}

// flock for the scope; blocks.
class FileLock {
 public:
  explicit FileLock(int fd) : fd_(fd) {
    int r;
    do r = flock(fd_, LOCK_EX);
    while (r != 0 && errno == EINTR);
    ok_ = r == 0;
  }
  ~FileLock() {
    if (ok_) flock(fd_, LOCK_UN);
  }
  bool ok() const { return ok_; }

 private:
  int fd_;
  bool ok_ = false;
};

}  // namespace

UidTable::UidTable(std::string path, uid_t base, uid_t range, int fd)
    : path_(std::move(path)), base_(base), range_(range), fd_(fd), next_(base) {}

UidTable::~UidTable() { close(fd_); }

Status UidTable::Open(const std::string& path, uid_t base, uid_t range, std::unique_ptr<UidTable>* out) {
  if (path.empty() || range == 0 || base == 0 || base + range < base) return Fail(path, "bad table or range");
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::exists(parent, ec)) {
    std::filesystem::create_directories(parent, ec);
    if (ec) return Fail(path, "cannot create its directory: " + ec.message());
    chmod(parent.c_str(), 0700);
  }
  // O_APPEND: every line lands at the end even if another process's table
  // object has not read up to it yet (all appends happen under the flock).
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Fail(path, std::string("cannot open: ") + std::strerror(errno));
  std::unique_ptr<UidTable> t(new UidTable(path, base, range, fd));
  {
    std::lock_guard<std::mutex> l(t->mu_);
    FileLock lock(fd);
    if (!lock.ok()) return Fail(path, std::string("cannot lock: ") + std::strerror(errno));
    if (Status s = t->CatchUp(); !s.ok()) return s;
  }
  *out = std::move(t);
  return Status::Ok();
}

Status UidTable::CatchUp() {
  struct stat st {};
  if (fstat(fd_, &st) != 0) return Fail(path_, std::string("cannot stat: ") + std::strerror(errno));
  if (st.st_size < read_to_)
    return Fail(path_, "it shrank (entries removed by hand?); refusing to reuse uids");
  std::string text(static_cast<size_t>(st.st_size - read_to_), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = pread(fd_, text.data() + got, text.size() - got, read_to_ + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return Fail(path_, std::string("cannot read: ") + (n < 0 ? std::strerror(errno) : "short read"));
    got += static_cast<size_t>(n);
  }
  size_t pos = 0;
  for (size_t nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    const std::string line = text.substr(pos, nl - pos);
    const size_t sp = line.find(' ');
    std::string key;
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = sp == std::string::npos ? 0 : std::strtoull(line.c_str(), &end, 10);
    const bool parsed = sp != std::string::npos && sp > 0 && errno == 0 && end == line.c_str() + sp &&
                        std::isdigit(static_cast<unsigned char>(line[0])) &&
                        Unescape(line.substr(sp + 1), &key);
    if (!parsed || line.size() > kMaxLine || v < base_ ||
        v >= static_cast<unsigned long long>(base_) + range_) {
      return Fail(path_, "line at byte " + std::to_string(read_to_ + static_cast<off_t>(pos)) +
                             " is not \"<uid> <workspace>\" with a uid in range; fix or restore the file");
    }
    const uid_t uid = static_cast<uid_t>(v);
    if (uids_.count(key) != 0 || uid < next_) {
      return Fail(path_,
                  "uid " + std::to_string(uid) + " or its workspace is recorded twice or out of order");
    }
    uids_[key] = uid;
    next_ = uid + 1;
  }
  read_to_ += static_cast<off_t>(pos);
  if (pos < text.size()) {
    // A line without its newline: an append cut short by a crash (we hold
    // the flock, so nobody is writing). Its uid was never handed out.
    if (ftruncate(fd_, read_to_) != 0)
      return Fail(path_, std::string("cannot drop a torn line: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status UidTable::Get(const std::string& key, uid_t* uid) {
  if (key.empty()) return Fail(path_, "an empty workspace has no uid");
  std::lock_guard<std::mutex> l(mu_);
  if (auto it = uids_.find(key); it != uids_.end()) {
    *uid = it->second;
    return Status::Ok();
  }
  FileLock lock(fd_);
  if (!lock.ok()) return Fail(path_, std::string("cannot lock: ") + std::strerror(errno));
  if (Status s = CatchUp(); !s.ok()) return s;
  if (auto it = uids_.find(key); it != uids_.end()) {  // another process recorded it meanwhile
    *uid = it->second;
    return Status::Ok();
  }
  const uint64_t end = static_cast<uint64_t>(base_) + range_;
  uint64_t candidate = next_;
  while (candidate < end && Named(static_cast<uid_t>(candidate))) ++candidate;
  if (candidate >= end) {
    return Fail(path_, "full: all " + std::to_string(range_) + " sandbox uids from " + std::to_string(base_) +
                           " are taken; no new workspace can run commands or CLI tools");
  }
  const std::string line = std::to_string(candidate) + " " + Escape(key) + "\n";
  if (line.size() > kMaxLine) return Fail(path_, "workspace path too long");
  // Recorded (and durable) before it is handed out; a failed write is cut
  // back off so the file stays whole.
  const ssize_t n = write(fd_, line.data(), line.size());
  const int e = errno;
  if (n != static_cast<ssize_t>(line.size()) || fsync(fd_) != 0) {
    const std::string why = n < 0                                    ? std::strerror(e)
                            : n != static_cast<ssize_t>(line.size()) ? "short write"
                                                                     : std::strerror(errno);
    (void)!ftruncate(fd_, read_to_);
    return Fail(path_, "cannot record a new uid: " + why);
  }
  read_to_ += static_cast<off_t>(line.size());
  uids_[key] = static_cast<uid_t>(candidate);
  next_ = static_cast<uid_t>(candidate + 1);
  *uid = static_cast<uid_t>(candidate);
  return Status::Ok();
}

}  // namespace tollgate
