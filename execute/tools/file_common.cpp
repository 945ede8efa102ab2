#include "execute/tools/file_common.h"

#include <unistd.h>

#include <cerrno>

#include "core/url.h"

namespace tollgate {

bool StringArg(const Json& args, const std::string& key, std::string* out, bool required) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return !required;
  if (!it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

bool OpenWorkspace(const ToolContext& ctx, Workspace* ws, Json* error) {
  Status s = Workspace::Open(ctx.policy->workspace_root, ctx.org_id, ctx.agent_id, ws);
  if (!s.ok()) *error = FailFrom(s);
  return s.ok();
}

Json FailFrom(const Status& s) { return ToolFail(s.code(), s.message(), s.code() == errc::kTimeout); }

Status ReadCapped(int fd, size_t cap, std::string* out) {
  out->clear();
  char buf[65536];
  while (out->size() <= cap) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return PathError(errno, "");
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  return Status::Ok();
}

namespace {
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string Base64Encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += kB64[v & 63];
  }
  if (i < in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    if (i + 1 < in.size()) v |= uint8_t(in[i + 1]) << 8;
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool Base64Decode(const std::string& input, std::string* out) {
  const std::string in = input;  // `out` may be `&input`
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const char* p = std::char_traits<char>::find(kB64, 64, c);
    if (p == nullptr) return false;
    acc = (acc << 6) | static_cast<uint32_t>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

bool IsValidUtf8(const std::string& s) { return ToValidUtf8(s) == s; }

Status CheckPathLimits(const std::string& rel) {
  if (rel.size() > kMaxPathBytes) {
    return Status::Error(errc::kPathForbidden, "the path is " + std::to_string(rel.size()) +
                                                   " bytes; the limit is " + std::to_string(kMaxPathBytes));
  }
  size_t components = 0, start = 0;
  while (start <= rel.size()) {
    size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    if (end - start > kMaxPathComponentBytes) {
      return Status::Error(errc::kPathForbidden, "a path component is longer than " +
                                                     std::to_string(kMaxPathComponentBytes) + " bytes");
    }
    if (end > start && ++components > kMaxPathComponents) {
      return Status::Error(errc::kPathForbidden,
                           "the path has more than " + std::to_string(kMaxPathComponents) + " components");
    }
    start = end + 1;
  }
  return Status::Ok();
}

Status CheckFilePath(const std::string& rel) {
  if (rel.empty()) return Status::Error(errc::kInvalidPath, "path is empty");
  if (rel.find('\0') != std::string::npos) return Status::Error(errc::kInvalidPath, "path holds a NUL byte");
  return Status::Ok();
}

std::string ToolPath(const std::string& rel) { return NormalizePath(rel); }

}  // namespace tollgate
