// The labels of a completed call's result (docs/policy.md, "Labels"):
// integrity, where its content came from, and confidentiality, what it
// holds. A session's labels are the meet and the join of its results'
// (decide/session_facts.h).
#pragma once

#include <cstdint>
#include <string>

namespace tollgate {

enum class Integrity : uint8_t { kTrusted = 0, kUntrusted = 1 };
enum class Confidentiality : uint8_t { kPublic = 0, kInternal = 1, kConfidential = 2, kSecret = 3 };
const char* IntegrityName(Integrity i);
const char* ConfidentialityName(Confidentiality c);
// False for a name that is not a label.
bool ParseIntegrity(const std::string& s, Integrity* out);
bool ParseConfidentiality(const std::string& s, Confidentiality* out);

}  // namespace tollgate
