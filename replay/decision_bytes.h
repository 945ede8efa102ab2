// The canonical bytes of a re-made decision's compared fields
// (kComparedFields of replay/redecide.h), written straight from the
// Decision: exactly CanonicalBytes() of those fields of Decision::ToJson(),
// without building the JSON tree. For re-decision's byte comparison with
// the recorded decision. tests/replay_test.cpp pins the two together on
// decisions of every verdict, with and without reservations, approvals,
// error codes and notify, and strings that need escaping.
#pragma once

#include <string>

#include "decide/policy_engine.h"

namespace tollgate::replay {

// Writes the bytes to *out. False (and *out unspecified) when a string is
// not valid UTF-8 or a number not finite, where CanonicalBytes fails too.
bool ComparedDecisionBytes(const Decision& d, std::string* out);

}  // namespace tollgate::replay
