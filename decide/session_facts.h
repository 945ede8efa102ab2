// SessionFacts: what a session's history says, folded from the log
// (docs/policy.md, "History"). Per (org, session), from the calls that ran
// (execution.completed) and only those:
//   - integrity, the meet of its results' labels (one untrusted result makes
//     the session untrusted), and the seq of the result that did it;
//   - confidentiality, the join (public < internal < confidential < secret),
//     and the seq that raised it;
//   - how many calls completed, in all and per tool;
//   - for each `after:` pattern of the policy (keyed by its text, so a reload
//     that keeps the pattern keeps its matches), its last kMaxMatches
//     matches: seq, time and the session's call count then.
// A result's labels and the patterns it matches are computed when its
// execution.completed is folded, under the policy in force then
// (ClassifyCall), from the call's decision.made (its invocation and
// subject), kept from the decision until the completion.
// An approval.granted with `declassify: true` clears the session's labels
// and matches ("this session is clean again") once that call ran: folded
// with its execution.completed, just before the call's own result, so a
// grant whose approval is then denied or expires declassifies nothing.
//
// One fold shared by decide, the start-up restore (the snapshot keeps it),
// replay and what-if (decide/decide_state.h). Idempotent: a completion is
// folded once (by seq), so the refold after a snapshot changes nothing.
//
// Exact replay: a decision records `history.upto`, the largest seq of the
// session's events folded when it was made. Replay folds in deferred mode:
// a session's items wait until CatchUp(upto) before its next decision, so it
// decides on exactly what the stage had (docs/policy.md, "History").
//
// A value type with no internal locking.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/canonical_json.h"
#include "core/event.h"
#include "core/status.h"
#include "decide/labels.h"

namespace tollgate {

class PolicyInForce;
struct CompiledLabels;

// One completed call as the fold sees it.
struct CallRecord {
  std::string tool, invocation, subject;
  bool redacted = false;  // its result's redaction fired
};

// An after-pattern's key with its hash computed once (when the policy is
// compiled), so decide's lookup of a session's matches hashes nothing.
struct PatternKey {
  std::string_view text;
  size_t hash;
};
struct PatternKeyHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  size_t operator()(const PatternKey& k) const { return k.hash; }
};
struct PatternKeyEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  bool operator()(const PatternKey& a, std::string_view b) const { return a.text == b; }
  bool operator()(std::string_view a, const PatternKey& b) const { return a == b.text; }
};

class SessionFacts {
 public:
  static constexpr size_t kMaxMatches = 100;  // per pattern and session (policy check bounds `count`)

  struct Match {
    uint64_t seq = 0;
    int64_t at_us = 0;  // the execution.completed's time
    uint64_t call = 0;  // the session's completed calls, this one included
    // The latest at_us of this match and every earlier one kept: a scan
    // back for matches since T stops at the first whose max_at < T
    // (completion times are not strictly in seq order).
    int64_t max_at = 0;
  };
  struct Session {
    Integrity integrity = Integrity::kTrusted;
    uint64_t integrity_seq = 0;  // the result that made it untrusted
    Confidentiality confidentiality = Confidentiality::kPublic;
    uint64_t confidentiality_seq = 0;  // the result that raised it last
    uint64_t calls = 0;                // completed calls folded
    uint64_t upto = 0;                 // the largest seq folded
    std::map<std::string, uint64_t> per_tool;
    // pattern key -> its matches, oldest first
    std::unordered_map<std::string, std::vector<Match>, PatternKeyHash, PatternKeyEq> matches;
    uint64_t declassified_seq = 0;
    std::string declassified_by, declassified_why;
  };

  // Folds one event of any type under `policy` (the policy in force, or a
  // what-if candidate): decision.made, execution.completed,
  // approval.granted/denied/expired; others are ignored.
  void Apply(const PolicyInForce& policy, const Event& e);
  // What Apply does with a decision.made of this verdict, invocation and
  // subject, without its JSON (re-decision's fast path).
  void ApplyDecision(const std::string& org, const std::string& request_id, const std::string& session,
                     const std::string& verdict, const std::string& invocation, const std::string& subject,
                     uint64_t seq);

  // The session's facts, or null when nothing of it was folded.
  const Session* Find(const std::string& org, const std::string& session) const;

  // Deferred mode (replay): folded items of a session wait until CatchUp.
  void set_deferred(bool d) { deferred_ = d; }
  // Folds the session's waiting items with seq <= upto, in seq order.
  void CatchUp(const std::string& org, const std::string& session, uint64_t upto);

  // What-if (replay/redecide.h): a call whose re-made decision is deny no
  // longer ran, so its recorded execution.completed is not folded.
  void set_counterfactual(bool c) { counterfactual_ = c; }

  size_t sessions() const { return sessions_.size(); }
  size_t pending_calls() const { return pending_.size(); }

  // The snapshot's form, and back (a bad one is refused: fold the log).
  Json ToJson() const;
  static Status FromJson(const Json& j, SessionFacts* out);

 private:
  struct Item {  // one session event, classified
    uint64_t seq = 0;
    int64_t at_us = 0;
    std::string tool;
    Integrity integrity = Integrity::kTrusted;
    Confidentiality confidentiality = Confidentiality::kPublic;
    std::vector<std::string> patterns;  // after-pattern keys it matches
    bool declassify = false;
    uint64_t declassify_seq = 0;
    std::string by, why;
  };
  struct Pending {
    std::string session, invocation, subject;
    uint64_t declassify_seq = 0;  // the approval.granted that declassifies, 0 for none
    std::string by, why;
  };
  void Fold(const std::string& key, Item item);
  void AddTo(Session& s, const Item& item);
  bool Seen(uint64_t seq);

  std::unordered_map<std::string, Pending> pending_;            // org \0 request_id: decided, not completed
  std::unordered_map<std::string, Session> sessions_;           // org \0 session_id
  std::unordered_map<std::string, std::vector<Item>> waiting_;  // deferred mode
  bool deferred_ = false;
  bool counterfactual_ = false;
  std::unordered_set<std::string> denied_;  // counterfactual: denied calls whose completion is dropped
  // Completions and declassifications folded, for idempotency: the seqs
  // above floor_; at or below it everything was folded.
  std::vector<uint64_t> seen_;  // sorted
  uint64_t floor_ = 0;
};

// The labels of a completed call's result under `labels` (docs/policy.md,
// "Labels"), defaults when null.
void ClassifyResult(const CompiledLabels* labels, const CallRecord& call, Integrity* integrity,
                    Confidentiality* confidentiality);

}  // namespace tollgate
