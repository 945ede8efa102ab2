#include "core/jwt.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "core/sha256.h"

namespace tollgate {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr size_t kSignatureBytes = 64;
constexpr size_t kPublicKeyBytes = 32;
constexpr size_t kMaxKeyFileBytes = 64 * 1024;

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using CtxPtr = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

std::shared_ptr<EVP_PKEY> Own(EVP_PKEY* key) {
  return key ? std::shared_ptr<EVP_PKEY>(key, EVP_PKEY_free) : nullptr;
}

const unsigned char* Bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

int SextetOf(char c) {
  const char* at = c == '\0' ? nullptr : std::strchr(kAlphabet, c);
  return at ? static_cast<int>(at - kAlphabet) : -1;
}

// Refusing to prompt: OpenSSL's default callback would read a passphrase
// from the terminal for an encrypted key.
int NoPassphrase(char*, int, int, void*) { return -1; }

// The key of `pem` when it is an Ed25519 private key, else null.
std::shared_ptr<EVP_PKEY> ParseEd25519Private(const std::string& pem) {
  if (pem.size() > kMaxKeyFileBytes) return nullptr;
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  auto key = Own(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr) : nullptr);
  ERR_clear_error();  // a failure must not surface in this thread's next OpenSSL call
  return key && EVP_PKEY_is_a(key.get(), "ED25519") ? key : nullptr;
}

std::string RawPublicKey(EVP_PKEY* key) {
  unsigned char raw[kPublicKeyBytes];
  size_t n = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(key, raw, &n) != 1) return "";
  return std::string(reinterpret_cast<char*>(raw), n);
}

Status NotAPrivateKey() {
  return Status::Error(errc::kInvalidKey, "not an unencrypted Ed25519 private key in PEM");
}

// The y coordinates (sign bit of x cleared) of the points of order 1, 2, 4
// and 8, plus the non-canonical spellings p and p+1 of 0 and 1: libsodium's
// list. Under such a key [s]B = R + [k]A holds for signatures anyone can make.
bool IsSmallOrder(std::string raw) {
  static const char* const kSmallOrderY[] = {
      "0000000000000000000000000000000000000000000000000000000000000000",
      "0100000000000000000000000000000000000000000000000000000000000000",
      "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
      "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
      "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
      "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
      "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  };
  raw[31] = static_cast<char>(raw[31] & 0x7f);
  std::string hex = ToHex(Bytes(raw), raw.size());
  for (const char* y : kSmallOrderY) {
    if (hex == y) return true;
  }
  return false;
}

Status FileError(const std::string& what, const std::string& path) {
  return Status::Error(errc::kKeyFile, what + " " + path + ": " + std::strerror(errno));
}

// mkdir with an explicit chmod, since the umask may have cleared bits.
Status MakeOwnerOnlyDirs(const std::filesystem::path& dir) {
  std::filesystem::path prefix;
  for (const auto& part : dir) {
    prefix /= part;
    if (mkdir(prefix.c_str(), 0700) == 0) {
      if (chmod(prefix.c_str(), 0700) != 0) return FileError("cannot chmod", prefix);
    } else if (errno != EEXIST) {
      return FileError("cannot create directory", prefix);
    }
  }
  return Status::Ok();
}

Status Unauthenticated(const std::string& why) { return Status::Error(errc::kUnauthenticated, "JWT " + why); }

// One base64url part of a token as a JSON object.
Status DecodeObject(std::string_view part, const std::string& name, Json* out) {
  std::string bytes;
  if (!Base64UrlDecode(part, &bytes)) return Unauthenticated(name + " is not unpadded base64url");
  Status s = ParseJson(bytes, out);
  if (!s.ok()) return Unauthenticated(name + " is not JSON: " + s.message());
  if (!out->is_object()) return Unauthenticated(name + " is not a JSON object");
  return Status::Ok();
}

}  // namespace

std::string Base64UrlEncode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = (acc << 8) | c;
    for (bits += 8; bits >= 6; bits -= 6) out += kAlphabet[(acc >> (bits - 6)) & 63];
  }
  if (bits > 0) out += kAlphabet[(acc << (6 - bits)) & 63];
  return out;
}

bool Base64UrlDecode(std::string_view text, std::string* out) {
  if (text.size() % 4 == 1) return false;  // 6 bits cannot end a byte
  std::string bytes;
  bytes.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = SextetOf(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  // Unused bits must be zero, or one token would have several spellings.
  if ((acc & ((1u << bits) - 1)) != 0) return false;
  *out = std::move(bytes);
  return true;
}

Status GenerateEd25519(std::string* private_pem, std::string* public_b64url) {
  auto key = Own(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  BioPtr bio(BIO_new(BIO_s_secmem()), BIO_free);  // wiped when freed
  char* data = nullptr;
  if (!key || !bio ||
      PEM_write_bio_PKCS8PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    ERR_clear_error();
    return Status::Error(errc::kInvalidKey, "OpenSSL could not generate an Ed25519 key");
  }
  long n = BIO_get_mem_data(bio.get(), &data);
  private_pem->assign(data, static_cast<size_t>(n));
  *public_b64url = Base64UrlEncode(RawPublicKey(key.get()));
  return Status::Ok();
}

Status Ed25519FromSeed(std::string_view seed, std::string* private_pem, std::string* public_b64url) {
  if (seed.size() != 32) return Status::Error(errc::kInvalidKey, "an Ed25519 seed is 32 bytes");
  auto key = Own(EVP_PKEY_new_raw_private_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(seed.data()), seed.size()));
  BioPtr bio(BIO_new(BIO_s_secmem()), BIO_free);
  char* data = nullptr;
  if (!key || !bio ||
      PEM_write_bio_PKCS8PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    ERR_clear_error();
    return Status::Error(errc::kInvalidKey, "OpenSSL could not make an Ed25519 key from a seed");
  }
  long n = BIO_get_mem_data(bio.get(), &data);
  private_pem->assign(data, static_cast<size_t>(n));
  *public_b64url = Base64UrlEncode(RawPublicKey(key.get()));
  return Status::Ok();
}

Status WritePrivateKeyFile(const std::string& path, const std::string& pem, bool overwrite) {
  std::filesystem::path target(path);
  Status s = MakeOwnerOnlyDirs(target.parent_path());
  if (!s.ok()) return s;
  // mkostemp opens O_CREAT|O_EXCL with mode 0600: never readable by others.
  std::string tmp = path + ".tmp-XXXXXX";
  int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return FileError("cannot create", tmp);
  struct Unlink {
    std::string path;
    ~Unlink() {
      if (!path.empty()) unlink(path.c_str());
    }
  } cleanup{tmp};
  // A short write to a fresh regular file is an error (ENOSPC), not a reason to retry.
  bool written = fchmod(fd, 0600) == 0 &&
                 write(fd, pem.data(), pem.size()) == static_cast<ssize_t>(pem.size()) && fsync(fd) == 0;
  if (close(fd) != 0 || !written) return FileError("cannot write", tmp);
  if (overwrite) {
    if (rename(tmp.c_str(), path.c_str()) != 0) return FileError("cannot rename to", path);
    cleanup.path.clear();
  } else if (link(tmp.c_str(), path.c_str()) != 0) {  // unlike rename, refuses an existing target atomically
    return errno == EEXIST ? Status::Error(errc::kKeyFile, "refusing to overwrite existing key file " + path)
                           : FileError("cannot link to", path);
  }
  // The new directory entry survives a crash only once the directory is synced.
  std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  bool synced = dfd >= 0 && fsync(dfd) == 0;
  if (dfd >= 0) close(dfd);
  return synced ? Status::Ok() : FileError("cannot sync directory", dir);
}

Status ReadPrivateKeyFile(const std::string& path, std::string* pem) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FileError("cannot open", path);
  std::string data(kMaxKeyFileBytes + 1, '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  if (in.bad()) return FileError("cannot read", path);
  data.resize(static_cast<size_t>(in.gcount()));
  if (data.size() > kMaxKeyFileBytes) {
    return Status::Error(errc::kKeyFile, path + " is over " + std::to_string(kMaxKeyFileBytes) + " bytes");
  }
  *pem = std::move(data);
  return Status::Ok();
}

Status PublicKeyOf(const std::string& private_pem, std::string* public_b64url) {
  auto key = ParseEd25519Private(private_pem);
  if (!key) return NotAPrivateKey();
  *public_b64url = Base64UrlEncode(RawPublicKey(key.get()));
  return Status::Ok();
}

Status JwtSigner::FromPem(const std::string& private_pem, JwtSigner* out, const std::string& kid) {
  JwtSigner signer;
  signer.key_ = ParseEd25519Private(private_pem);
  if (!signer.key_) return NotAPrivateKey();
  Json header = {{"alg", "EdDSA"}, {"typ", "JWT"}};
  if (!kid.empty()) header["kid"] = kid;
  std::string bytes;
  Status s = CanonicalBytes(header, &bytes);
  if (!s.ok()) return s;
  signer.header_b64_ = Base64UrlEncode(bytes) + ".";
  signer.public_b64url_ = Base64UrlEncode(RawPublicKey(signer.key_.get()));
  *out = std::move(signer);
  return Status::Ok();
}

std::string JwtSigner::Sign(const Json& claims) const {
  if (!key_) throw std::runtime_error("JwtSigner::Sign on an empty signer");
  std::string payload;
  if (!claims.is_object() || !CanonicalBytes(claims, &payload).ok()) {
    throw std::invalid_argument("JWT claims must be a JSON object of valid UTF-8 without NaN or infinity");
  }
  std::string token = header_b64_ + Base64UrlEncode(payload);
  unsigned char sig[kSignatureBytes];
  size_t n = sizeof sig;
  // A context per call: the key is shared read-only, the context is not.
  CtxPtr ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &n, Bytes(token), token.size()) != 1) {
    ERR_clear_error();
    throw std::runtime_error("OpenSSL Ed25519 signing failed");
  }
  return token + "." + Base64UrlEncode(std::string_view(reinterpret_cast<char*>(sig), n));
}

Status ParseJwt(std::string_view token, JwtParts* out) {
  if (token.size() > kMaxJwtBytes)
    return Unauthenticated("is over " + std::to_string(kMaxJwtBytes) + " bytes");
  size_t dot1 = token.find('.');
  size_t dot2 = dot1 == token.npos ? token.npos : token.find('.', dot1 + 1);
  if (dot2 == token.npos || token.find('.', dot2 + 1) != token.npos) {
    return Unauthenticated("is not three dot-separated parts");
  }
  JwtParts parts;
  Status s = DecodeObject(token.substr(0, dot1), "header", &parts.header);
  if (!s.ok()) return s;
  auto alg = parts.header.find("alg");
  if (alg == parts.header.end()) return Unauthenticated("header has no alg");
  if (*alg != "EdDSA") {
    std::string named = alg->dump();
    if (named.size() > 40) named = ToValidUtf8(named.substr(0, 40)) + "...";
    return Unauthenticated("alg " + named + " is refused: only EdDSA is accepted");
  }
  if (parts.header.contains("crit")) return Unauthenticated("header has crit: no extension is supported");
  s = DecodeObject(token.substr(dot1 + 1, dot2 - dot1 - 1), "payload", &parts.claims);
  if (!s.ok()) return s;
  if (!Base64UrlDecode(token.substr(dot2 + 1), &parts.signature) ||
      parts.signature.size() != kSignatureBytes) {
    return Unauthenticated("signature is not 64 bytes of unpadded base64url");
  }
  parts.signing_input = std::string(token.substr(0, dot2));
  *out = std::move(parts);
  return Status::Ok();
}

Status Ed25519Verifier::FromPublic(std::string_view public_b64url, Ed25519Verifier* out) {
  std::string raw;
  if (!Base64UrlDecode(public_b64url, &raw) || raw.size() != kPublicKeyBytes) {
    return Status::Error(errc::kInvalidKey, "an Ed25519 public key is 32 bytes in unpadded base64url");
  }
  if (IsSmallOrder(raw)) {
    return Status::Error(errc::kInvalidKey,
                         "Ed25519 public key is a small-order point: anyone can sign for it");
  }
  // sodium_init is idempotent and thread-safe; -1 means no usable RNG,
  // which verification does not need.
  static const bool sodium_ready = sodium_init() >= 0 || true;
  (void)sodium_ready;
  out->raw_ = std::move(raw);
  out->public_b64url_ = std::string(public_b64url);
  return Status::Ok();
}

bool Ed25519Verifier::Verify(std::string_view message, std::string_view signature) const {
  if (raw_.size() != kPublicKeyBytes || signature.size() != kSignatureBytes) return false;
  // libsodium, not OpenSSL: 42 us a verification here against OpenSSL
  // 3.0's 65-140 us, and verification is a third of ingest's CPU
  // (docs/trust.md). It also refuses non-canonical signatures.
  return crypto_sign_verify_detached(Bytes(signature), Bytes(message), message.size(), Bytes(raw_)) == 0;
}

}  // namespace tollgate
