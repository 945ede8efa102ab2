// Secret redaction: what the log must never hold in clear (docs/redaction.md).
//
// Two ways a value is a secret:
//  - by key: an object key that, folded (lower case, percent-escapes
//    decoded, the separators - _ . and space dropped: "PrivateKey" and
//    "private_key" both read "privatekey"), contains a secret fragment
//    ("password", "token", "apikey", ...), or whose last word is "pass" or
//    "pwd" ("db_pass", not "passport"): the whole value is replaced;
//  - by value: inside any string, the secret part of a recognised format is
//    replaced and the rest kept (bearer tokens, JWTs, PEM private keys, AWS
//    key ids, vendor tokens by prefix (BuiltinTokenPrefixes), URL userinfo,
//    secret query parameters and NAME=VALUE pairs (percent-encoded names
//    too), `--password=X` and `--api-key X` arguments, curl's `-u USER:PW`,
//    mysql's `-pPW`), plus the policy's own regexes. Prose is left alone
//    ("admin.token: No such file", "password reset link sent").
// Every secret becomes "[REDACTED]"; redacting a redacted value changes
// nothing (idempotent), so a logged form can be compared with a re-redacted one.
// The scanner is hand-written (no regex) for the built-in formats: ingest
// runs it on every request. Thread-safe: a Redactor is immutable.
#pragma once

#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "core/canonical_json.h"
#include "core/event.h"
#include "core/status.h"

namespace tollgate {

inline constexpr const char* kRedacted = "[REDACTED]";

// Key-name fragments that mark a secret (folded: lower case, no separators).
const std::vector<std::string>& DefaultSecretKeyPatterns();

// The prefixes of the vendor tokens the value scanner knows (sk-, ghp_,
// xoxb-, AKIA, hf_, ...), each redacted with its body wherever it starts a word.
const std::vector<std::string>& BuiltinTokenPrefixes();

class Redactor {
 public:
  // The built-in rules only.
  Redactor();
  // These key fragments (instead of the defaults and the "pass"/"pwd" word
  // rule) and the built-in value scanner.
  explicit Redactor(std::vector<std::string> key_fragments);
  // The built-in rules plus the policy's top-level `redact:` section
  // ({keys: [fragments], values: [ECMAScript regexes]}); a value regex with
  // a capture group redacts only group 1. Absent section: the built-ins.
  // A bad section (not a map, a regex that does not compile) is an error.
  static Status FromPolicy(const Json& policy_doc, std::shared_ptr<const Redactor>* out);

  // Whether an object key names a secret (a fragment in its folded form).
  bool SecretKey(std::string_view key) const;
  // Redacts the secrets inside `*s`; true when something changed.
  bool RedactString(std::string* s) const;
  // Redacts `value` in place, by key and by value, at any depth; returns the
  // JSON pointers (under `path`) of what changed.
  std::vector<std::string> Redact(Json& value, const std::string& path = "") const;

 private:
  void AddKey(std::string_view fragment);  // folded; an empty one is dropped

  std::vector<std::string> keys_;  // folded fragments
  bool builtin_words_ = true;      // the "pass"/"pwd" last-word and X-Auth-* rules
  std::vector<std::regex> values_;
};

// The built-in rules (shared, never null).
std::shared_ptr<const Redactor> DefaultRedactor();

// Replaces, at any depth, the value of every object key whose lower-cased
// name contains one of `patterns` by "[REDACTED]", and the secrets the
// built-in value scanner finds in every string; returns the JSON pointers
// of what it replaced (under `path`).
std::vector<std::string> RedactSecrets(Json& value, const std::vector<std::string>& patterns,
                                       const std::string& path = "");

// The decision.made fields that can carry request text (invocation,
// subject, reason, checks[].detail), redacted by value; the pointers.
std::vector<std::string> RedactDecision(Json& decision, const Redactor& r);

// The redaction rules in force, folded from policy.updated (tier file) the
// way decide folds the policy; shared by the stages of one process.
class RedactorInForce {
 public:
  std::shared_ptr<const Redactor> get() const;
  void set(std::shared_ptr<const Redactor> r);
  // Folds policy.updated of tier file: its policy's `redact:` section comes
  // into force (a section that does not load keeps the rules in force; the
  // decide stage refuses such a file before it is logged).
  void OnAppended(const std::vector<Event>& events);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Redactor> r_ = DefaultRedactor();
};

}  // namespace tollgate
