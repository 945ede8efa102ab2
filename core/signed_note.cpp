#include "core/signed_note.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sodium.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>

#include "core/sha256.h"

namespace tollgate {
namespace {

constexpr std::string_view kSigPrefix = "\xE2\x80\x94 ";  // U+2014 EM DASH, then a space
constexpr size_t kEd25519Bytes = 32;
constexpr size_t kSignatureBytes = 64;
constexpr size_t kTimestampBytes = 8;

const unsigned char* Bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

Status Malformed(const std::string& why) { return Status::Error(errc::kNoteMalformed, "note " + why); }
Status BadKey(const std::string& why) { return Status::Error(errc::kInvalidKey, why); }

void EnsureSodium() {
  // Idempotent and thread-safe; -1 means no usable RNG, which neither
  // deterministic signing nor verification needs.
  static const bool ready = sodium_init() >= 0 || true;
  (void)ready;
}

// Decodes the UTF-8 sequence at s[*i], advancing *i. False on an invalid,
// overlong or surrogate sequence or one past U+10FFFF.
bool NextRune(std::string_view s, size_t* i, uint32_t* rune) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t b0 = byte(*i);
  size_t n = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || *i + n > s.size()) return false;
  uint32_t r = n == 1 ? b0 : b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(*i + k) & 0xC0) != 0x80) return false;
    r = (r << 6) | (byte(*i + k) & 0x3F);
  }
  static constexpr uint32_t kMinOf[] = {0, 0, 0x80, 0x800, 0x10000};
  if (r < kMinOf[n] || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) return false;
  *i += n;
  *rune = r;
  return true;
}

// Unicode White_Space, as Go's unicode.IsSpace (the reference
// implementation's test for key names).
bool IsUnicodeSpace(uint32_t r) {
  return (r >= 0x09 && r <= 0x0D) || r == 0x20 || r == 0x85 || r == 0xA0 || r == 0x1680 ||
         (r >= 0x2000 && r <= 0x200A) || r == 0x2028 || r == 0x2029 || r == 0x202F || r == 0x205F ||
         r == 0x3000;
}

// The signed-note character rules: UTF-8, no control character but "\n".
Status CheckNoteCharacters(std::string_view note) {
  for (size_t i = 0; i < note.size();) {
    uint32_t r = 0;
    if (!NextRune(note, &i, &r)) return Malformed("is not valid UTF-8");
    if (r < 0x20 && r != '\n') return Malformed("has a control character other than newline");
  }
  return Status::Ok();
}

uint32_t BigEndian32(std::string_view b) {
  uint32_t v = 0;
  for (size_t k = 0; k < 4; ++k) v = (v << 8) | static_cast<uint8_t>(b[k]);
  return v;
}

std::string BigEndianBytes(uint64_t v, size_t n) {
  std::string out(n, '\0');
  for (size_t k = n; k-- > 0; v >>= 8) out[k] = static_cast<char>(v & 0xFF);
  return out;
}

// One line "— <name> <base64>" (without its "\n").
Status ParseSignatureLine(std::string_view line, NoteSignature* out) {
  if (line.substr(0, kSigPrefix.size()) != kSigPrefix) {
    return Malformed("signature line does not start with an em dash (U+2014) and a space");
  }
  line.remove_prefix(kSigPrefix.size());
  size_t space = line.find(' ');
  if (space == line.npos) return Malformed("signature line has no space between name and signature");
  std::string_view name = line.substr(0, space);
  if (!IsValidKeyName(name)) return Malformed("signature line has an invalid key name");
  std::string bytes;
  if (!Base64StdDecode(line.substr(space + 1), &bytes)) {
    return Malformed("signature of " + std::string(name) + " is not padded standard base64");
  }
  if (bytes.size() < 5) return Malformed("signature of " + std::string(name) + " is under 5 bytes");
  out->name = std::string(name);
  out->key_hash = BigEndian32(bytes);
  out->sig = bytes.substr(4);
  return Status::Ok();
}

Status ParseSignatureBlock(std::string_view block, std::vector<NoteSignature>* sigs) {
  if (block.empty() || block.back() != '\n') return Malformed("has no signature lines ending in a newline");
  while (!block.empty()) {
    if (sigs->size() == kMaxNoteSignatures) {
      return Malformed("has over " + std::to_string(kMaxNoteSignatures) + " signature lines");
    }
    size_t nl = block.find('\n');
    NoteSignature sig;
    Status s = ParseSignatureLine(block.substr(0, nl), &sig);
    if (!s.ok()) return s;
    sigs->push_back(std::move(sig));
    block.remove_prefix(nl + 1);
  }
  return Status::Ok();
}

// Libsodium's secret key, wiped when the last signer copy lets it go.
std::shared_ptr<const std::string> NewSecret(std::string_view seed, std::string* public_key) {
  EnsureSodium();
  auto* secret = new std::string(crypto_sign_SECRETKEYBYTES, '\0');
  std::shared_ptr<const std::string> owned(secret, [](const std::string* p) {
    sodium_memzero(const_cast<char*>(p->data()), p->size());
    delete p;
  });
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  crypto_sign_seed_keypair(pk, reinterpret_cast<unsigned char*>(secret->data()), Bytes(seed));
  public_key->assign(reinterpret_cast<char*>(pk), sizeof pk);
  return owned;
}

bool SupportedType(uint8_t type) { return type == kNoteKeyEd25519 || type == kNoteKeyCosignatureV1; }

int NoPassphrase(char*, int, int, void*) { return -1; }

}  // namespace

std::string Base64StdEncode(std::string_view bytes) {
  std::string out = Base64UrlEncode(bytes);
  for (char& c : out) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  out.append((4 - out.size() % 4) % 4, '=');
  return out;
}

bool Base64StdDecode(std::string_view text, std::string* out) {
  if (text.size() % 4 != 0) return false;
  size_t pad = 0;
  while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
  std::string core(text.substr(0, text.size() - pad));
  if ((4 - core.size() % 4) % 4 != pad) return false;  // "====", "A===" and the like
  for (char& c : core) {
    if (c == '-' || c == '_') return false;  // the URL alphabet
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return Base64UrlDecode(core, out);  // refuses '=' inside and non-zero unused bits
}

std::string FormatNote(const SignedNote& note) {
  std::string out = note.text + "\n";
  for (const NoteSignature& sig : note.sigs) {
    out += kSigPrefix;
    out += sig.name + " " + Base64StdEncode(BigEndianBytes(sig.key_hash, 4) + sig.sig) + "\n";
  }
  return out;
}

Status ParseNote(std::string_view note, SignedNote* out) {
  if (note.size() > kMaxNoteBytes) return Malformed("is over " + std::to_string(kMaxNoteBytes) + " bytes");
  Status s = CheckNoteCharacters(note);
  if (!s.ok()) return s;
  // The text ends at the last blank line: it may contain blank lines,
  // signature lines cannot.
  size_t split = note.rfind("\n\n");
  if (split == note.npos) return Malformed("has no blank line between text and signatures");
  SignedNote parsed;
  parsed.text = std::string(note.substr(0, split + 1));
  s = ParseSignatureBlock(note.substr(split + 2), &parsed.sigs);
  if (!s.ok()) return s;
  *out = std::move(parsed);
  return Status::Ok();
}

Status CheckNoteText(std::string_view text) {
  if (text.size() > kMaxNoteBytes)
    return Malformed("text is over " + std::to_string(kMaxNoteBytes) + " bytes");
  if (text.empty() || text.back() != '\n') return Malformed("text does not end in a newline");
  return CheckNoteCharacters(text);
}

bool IsValidKeyName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size();) {
    uint32_t r = 0;
    if (!NextRune(name, &i, &r) || r < 0x20 || r == '+' || IsUnicodeSpace(r)) return false;
  }
  return true;
}

uint32_t NoteKeyHash(std::string_view name, uint8_t type, std::string_view public_key) {
  const char type_byte = static_cast<char>(type);
  Digest d = Sha256({name, "\n", std::string_view(&type_byte, 1), public_key});
  return BigEndian32(std::string_view(reinterpret_cast<const char*>(d.data()), 4));
}

std::string KeyHashHex(uint32_t key_hash) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", key_hash);
  return buf;
}

std::string CosignatureMessage(uint64_t timestamp, std::string_view text) {
  std::string out = "cosignature/v1\ntime " + std::to_string(timestamp) + "\n";
  out += text;
  return out;
}

Status NoteVerifier::FromPublic(std::string name, uint8_t type, std::string_view public_key,
                                NoteVerifier* out) {
  if (!IsValidKeyName(name)) return BadKey("a key name is non-empty UTF-8 without spaces or '+'");
  if (!SupportedType(type)) return BadKey("signature type " + std::to_string(type) + " is not supported");
  if (public_key.size() != kEd25519Bytes) return BadKey("an Ed25519 public key is 32 bytes");
  NoteVerifier v;
  Status s = Ed25519Verifier::FromPublic(Base64UrlEncode(public_key), &v.ed25519_);
  if (!s.ok()) return s;
  v.key_hash_ = NoteKeyHash(name, type, public_key);
  v.name_ = std::move(name);
  v.type_ = type;
  v.public_key_ = std::string(public_key);
  *out = std::move(v);
  return Status::Ok();
}

bool NoteVerifier::Verify(std::string_view text, std::string_view sig) const {
  if (type_ == kNoteKeyEd25519) return sig.size() == kSignatureBytes && ed25519_.Verify(text, sig);
  if (type_ != kNoteKeyCosignatureV1 || sig.size() != kTimestampBytes + kSignatureBytes) return false;
  uint64_t timestamp = (uint64_t{BigEndian32(sig)} << 32) | BigEndian32(sig.substr(4));
  if (timestamp > uint64_t{INT64_MAX}) return false;  // tlog-cosignature: at most 2^63 - 1
  return ed25519_.Verify(CosignatureMessage(timestamp, text), sig.substr(kTimestampBytes));
}

Status ParseVerifierKey(std::string_view vkey, NoteVerifier* out) {
  if (vkey.size() > 1024) return BadKey("verifier key is over 1024 bytes");
  size_t plus1 = vkey.find('+');
  size_t plus2 = plus1 == vkey.npos ? vkey.npos : vkey.find('+', plus1 + 1);
  if (plus2 == vkey.npos) return BadKey("verifier key is not <name>+<key ID>+<key>");
  std::string_view hex = vkey.substr(plus1 + 1, plus2 - plus1 - 1);
  std::string key;
  if (hex.size() != 8 || hex.find_first_not_of("0123456789abcdef") != hex.npos) {
    return BadKey("verifier key ID is not 8 lowercase hex digits");
  }
  if (!Base64StdDecode(vkey.substr(plus2 + 1), &key) || key.empty()) {
    return BadKey("verifier key material is not padded standard base64");
  }
  NoteVerifier v;
  Status s = NoteVerifier::FromPublic(std::string(vkey.substr(0, plus1)), static_cast<uint8_t>(key[0]),
                                      std::string_view(key).substr(1), &v);
  if (!s.ok()) return s;
  if (KeyHashHex(v.KeyHash()) != hex) return BadKey("verifier key ID does not match its name and key");
  *out = std::move(v);
  return Status::Ok();
}

std::string FormatVerifierKey(const NoteVerifier& key) {
  return key.name() + "+" + KeyHashHex(key.KeyHash()) + "+" +
         Base64StdEncode(std::string(1, static_cast<char>(key.type())) + key.public_key());
}

Status NoteSigner::FromSeed(std::string name, std::string_view seed, NoteSigner* out, uint8_t type) {
  if (seed.size() != kEd25519Bytes) return BadKey("an Ed25519 seed is 32 bytes");
  if (!IsValidKeyName(name)) return BadKey("a key name is non-empty UTF-8 without spaces or '+'");
  if (!SupportedType(type)) return BadKey("signature type " + std::to_string(type) + " is not supported");
  NoteSigner signer;
  signer.secret_ = NewSecret(seed, &signer.public_key_);
  signer.key_hash_ = NoteKeyHash(name, type, signer.public_key_);
  signer.name_ = std::move(name);
  signer.type_ = type;
  *out = std::move(signer);
  return Status::Ok();
}

Status NoteSigner::FromPem(std::string name, const std::string& private_pem, NoteSigner* out, uint8_t type) {
  if (private_pem.size() > 64 * 1024) return BadKey("private key PEM is over 64 KiB");
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(private_pem.data(), static_cast<int>(private_pem.size())), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr) : nullptr, EVP_PKEY_free);
  unsigned char seed[kEd25519Bytes];
  size_t n = sizeof seed;
  bool ok = key && EVP_PKEY_is_a(key.get(), "ED25519") &&
            EVP_PKEY_get_raw_private_key(key.get(), seed, &n) == 1 && n == sizeof seed;
  ERR_clear_error();  // a failure must not surface in this thread's next OpenSSL call
  if (!ok) return BadKey("not an unencrypted Ed25519 private key in PEM");
  Status s = FromSeed(std::move(name), std::string_view(reinterpret_cast<char*>(seed), n), out, type);
  OPENSSL_cleanse(seed, sizeof seed);
  return s;
}

NoteVerifier NoteSigner::Verifier() const {
  NoteVerifier v;
  if (secret_) (void)NoteVerifier::FromPublic(name_, type_, public_key_, &v);
  return v;
}

std::string NoteSigner::SignBytes(std::string_view message) const {
  if (!secret_) throw std::logic_error("NoteSigner::SignBytes on an empty signer");
  unsigned char sig[crypto_sign_BYTES];
  crypto_sign_detached(sig, nullptr, Bytes(message), message.size(), Bytes(*secret_));
  return std::string(reinterpret_cast<char*>(sig), sizeof sig);
}

NoteSignature NoteSigner::Sign(std::string_view text) const {
  if (type_ != kNoteKeyEd25519) throw std::logic_error("NoteSigner::Sign needs an Ed25519 (0x01) signer");
  return NoteSignature{name_, key_hash_, SignBytes(text)};
}

Status VerifyKnownSignatures(const SignedNote& note, const std::vector<NoteVerifier>& known,
                             std::vector<std::string>* verified_names) {
  std::vector<bool> seen(known.size(), false);
  std::vector<std::string> names;
  for (const NoteSignature& sig : note.sigs) {
    size_t k = 0;
    while (k < known.size() && (known[k].name() != sig.name || known[k].KeyHash() != sig.key_hash)) ++k;
    if (k == known.size()) continue;  // an unknown key: ignored, as the spec requires
    std::string who = sig.name + "+" + KeyHashHex(sig.key_hash);
    if (seen[k]) return Status::Error(errc::kNoteUnverified, "note has two signatures by " + who);
    seen[k] = true;
    if (!known[k].Verify(note.text, sig.sig)) {
      return Status::Error(errc::kNoteUnverified, "note signature by " + who + " does not verify");
    }
    names.push_back(sig.name);
  }
  if (verified_names) *verified_names = std::move(names);
  return Status::Ok();
}

Status VerifyNote(const SignedNote& note, const std::vector<NoteVerifier>& known,
                  std::vector<std::string>* verified_names) {
  std::vector<std::string> names;
  Status s = VerifyKnownSignatures(note, known, &names);
  if (!s.ok()) return s;
  if (names.empty()) return Status::Error(errc::kNoteUnverified, "note is signed by no known key");
  if (verified_names) *verified_names = std::move(names);
  return Status::Ok();
}

}  // namespace tollgate
