// The canonical bytes of a re-made decision's compared fields
// (kComparedFields of replay/redecide.h), written straight from the
// Decision: exactly CanonicalBytes() of those fields of Decision::ToJson(),
// without building the JSON tree. For re-decision's byte comparison with
// the recorded decision. tests/replay_test.cpp pins the two together on
// decisions of every verdict, with and without reservations, approvals,
// error codes and notify, and strings that need escaping.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "decide/policy_engine.h"

namespace tollgate::replay {

// Writes the bytes to *out. False (and *out unspecified) when a string is
// not valid UTF-8 or a number not finite, where CanonicalBytes fails too.
bool ComparedDecisionBytes(const Decision& d, std::string* out);

// history.upto of a decision kept as those bytes, into *upto; false (and
// *upto unchanged) when it records no history.
bool HistoryUpto(std::string_view compared_bytes, uint64_t* upto);

}  // namespace tollgate::replay
