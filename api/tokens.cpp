#include "api/tokens.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/canonical_json.h"
#include "core/json_error.h"
#include "core/sha256.h"

namespace tollgate {
namespace {

Status Bad(const std::string& path, const std::string& why) {
  return Status::Error(errc::kSchemaViolation, path + ": " + why);
}

bool IsHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Writes `text` to `path` with mode 0600, via a temporary file.
Status WritePrivate(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return Status::Error(errc::kLogIO, "cannot write " + tmp);
  ::fchmod(fd, 0600);
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::fsync(fd) == 0 && ok;
  ::close(fd);
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, path, ec);
  if (!ok || ec) return Status::Error(errc::kLogIO, "cannot write " + path);
  return Status::Ok();
}

}  // namespace

bool Principal::Has(const std::string& role) const {
  for (const auto& r : roles) {
    if (r == role) return true;
  }
  return false;
}

Status TokenStore::Load(const std::string& path, TokenStore* out) {
  try {
    return LoadFile(path, out);
  } catch (const Json::exception& e) {  // a field of the wrong type
    return Bad(path, JsonErrorText(e));
  } catch (const std::exception& e) {
    return Bad(path, e.what());
  }
}

Status TokenStore::LoadFile(const std::string& path, TokenStore* out) {
  std::ifstream in(path);
  if (!in) return Status::Error(errc::kNotFound, "no tokens file " + path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Json j;
  Status s = ParseJson(text, &j);
  if (!s.ok()) return s;
  if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array())
    return Bad(path, "expected {\"tokens\": [...]}");
  TokenStore store;
  std::map<std::string, std::set<std::string>> orgs_of;  // identity -> orgs, for the deployment-wide line
  for (const auto& t : j["tokens"]) {
    if (!t.is_object()) return Bad(path, "a token entry is not an object");
    const std::string hash = t.value("token_sha256", "");
    if (!IsHex64(hash)) return Bad(path, "token_sha256 must be 64 lowercase hex digits");
    Principal p;
    p.identity = t.value("identity", "");
    p.org_id = t.value("org_id", "");
    if (p.identity.empty() || p.org_id.empty()) return Bad(path, "identity and org_id are required");
    if (!t.contains("roles") || !t["roles"].is_array()) return Bad(path, "roles must be an array");
    for (const auto& r : t["roles"]) {
      const std::string role = r.is_string() ? r.get<std::string>() : "";
      bool known = false;
      for (const char* k : kRoles) known = known || role == k;
      if (!known) return Bad(path, "unknown role '" + role + "' (agent, approver, auditor, admin)");
      p.roles.push_back(role);
    }
    if (p.org_id == "*" && !p.admin()) return Bad(path, "org_id \"*\" is for admin tokens only");
    // As core/credentials.h: orgs may share a name, never with a
    // deployment-wide identity.
    for (const std::string& held : orgs_of[p.identity]) {
      if ((held == "*") != (p.org_id == "*")) {
        return Bad(path, "identity '" + p.identity + "' is both deployment-wide and org '" +
                             (held == "*" ? p.org_id : held) + "''s");
      }
    }
    orgs_of[p.identity].insert(p.org_id);
    store.by_hash_[hash] = std::move(p);
  }
  *out = std::move(store);
  return Status::Ok();
}

bool BearerPrincipal(const CredentialRegistry* credentials, const TokenStore& tokens,
                     const std::string& authorization, Principal* out) {
  const std::string prefix = "Bearer ";
  if (authorization.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string token = authorization.substr(prefix.size());
  if (credentials == nullptr) return tokens.Authenticate(token, out);
  Credential c;
  if (!credentials->Token(Sha256Hex(token), &c)) return false;
  *out = Principal();
  out->identity = c.identity;
  out->org_id = c.org_id;
  out->roles = c.roles;
  return true;
}

bool TokenStore::Authenticate(const std::string& token, Principal* out) const {
  if (token.empty()) return false;
  auto it = by_hash_.find(Sha256Hex(token));
  if (it == by_hash_.end()) return false;
  *out = it->second;
  return true;
}

std::string NewToken() {
  unsigned char buf[32];
  if (RAND_bytes(buf, sizeof buf) != 1) std::abort();  // no entropy: never hand out a guessable token
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : buf) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

Status AddToken(const std::string& path, const Principal& who, std::string* token) {
  Json j = {{"tokens", Json::array()}};
  std::ifstream in(path);
  if (in) {
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Status s = ParseJson(text, &j);
    if (!s.ok()) return s;
    if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array())
      return Bad(path, "expected {\"tokens\": [...]}");
  }
  *token = NewToken();
  j["tokens"].push_back({{"token_sha256", Sha256Hex(*token)},
                         {"identity", who.identity},
                         {"org_id", who.org_id},
                         {"roles", who.roles}});
  return WritePrivate(path, j.dump(2) + "\n");
}

Status EnsureAdminToken(const std::string& tokens_path, const std::string& admin_token_path, bool* created) {
  *created = false;
  if (std::filesystem::exists(tokens_path)) return Status::Ok();
  std::string token;
  Principal admin;
  admin.identity = "admin";
  admin.org_id = "*";
  admin.roles = {"admin"};
  Status s = AddToken(tokens_path, admin, &token);
  if (!s.ok()) return s;
  s = WritePrivate(admin_token_path, token + "\n");
  if (!s.ok()) return s;
  *created = true;
  return Status::Ok();
}

}  // namespace tollgate
