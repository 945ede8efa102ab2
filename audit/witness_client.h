// Witness cosignatures for our checkpoints over the C2SP tlog-witness
// protocol (https://c2sp.org/tlog-witness; docs/log_format.md, "Witnesses").
//
// After the checkpointer (audit/checkpointer.h) signs a checkpoint it
// Offer()s it here and goes on; this class's own thread POSTs
//
//   <url>/add-checkpoint
//   old <size the witness last cosigned>\n
//   <base64 consistency proof hash>\n ...     (RFC 6962 from that size)
//   \n
//   <the signed checkpoint note>
//
// to every witness, checks each returned cosignature/v1 line against that
// witness's pinned key, and once `quorum` witnesses cosigned, stores the
// note with their lines appended in place of the plain one
// (MerkleStore::PutCheckpoint), so it is what GET /v1/audit/checkpoint and
// the proofs carry. A witness's size starts at 0 (it may have cosigned
// before a restart): a 409 Conflict answering text/x.tlog.size gives its
// size, and the request is made once more with a proof from there.
// Failures are kept in last_error() and retried with backoff on the latest
// checkpoint; they never hold up signing. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "audit/merkle.h"
#include "core/checkpoint.h"

namespace tollgate {

struct WitnessEndpoint {
  std::string url;   // the submission prefix, e.g. "https://witness.example/w1"
  NoteVerifier key;  // its cosignature/v1 verifier key (type 0x04)
};

// "<url>=<verifier key>" (the flag `up --witness`): E_INVALID_KEY unless
// the key is a cosignature/v1 vkey, E_INVALID_QUERY for a URL that is not
// http(s).
Status ParseWitnessFlag(std::string_view flag, WitnessEndpoint* out);

// One HTTP answer; status 0 when there was none.
struct WitnessReply {
  int status = 0;
  std::string content_type;
  std::string body;
};
// POSTs `body` (text/plain) to `url`; a non-ok Status only when no answer
// came (connection, timeout).
using WitnessPost =
    std::function<Status(const std::string& url, const std::string& body, WitnessReply* reply)>;

// The add-checkpoint request body.
std::string AddCheckpointBody(uint64_t old_size, const std::vector<merkle::Hash>& proof,
                              std::string_view note);

struct WitnessOptions {
  std::vector<WitnessEndpoint> witnesses;
  size_t quorum = 0;  // 0: all of them
  WitnessPost post;
  std::chrono::milliseconds max_backoff{30'000};
};

// Stores the cosigned note of `size` in place of the plain one
// (MerkleStore::PutCheckpoint).
using CosignedStore = std::function<Status(uint64_t size, const std::string& note)>;

class Witnesses {
 public:
  // `tree` (the log's, for the consistency proofs) outlives this.
  // E_INVALID_QUERY for a quorum above the count, a key that is not a
  // cosignature key, or no transport.
  static Status Start(const merkle::SubtreeSource& tree, CosignedStore store, WitnessOptions options,
                      std::unique_ptr<Witnesses>* out);
  ~Witnesses();  // the request in flight finishes; the thread stops

  // Asks the witnesses to cosign `note` (the checkpoint of `size` as signed
  // and stored) unless a larger one is waiting. Never blocks on them.
  void Offer(uint64_t size, std::string note);

  Status last_error() const;
  uint64_t cosigned_size() const { return cosigned_.load(); }  // latest stored with the quorum
  std::atomic<uint64_t> rounds{0};                             // checkpoints that reached the quorum
  std::atomic<uint64_t> failures{0};                           // witness requests that gave no cosignature

 private:
  Witnesses(const merkle::SubtreeSource& tree, CosignedStore store, WitnessOptions options);
  void Run();
  Status Round(uint64_t size, const std::string& note, std::string* missing);
  // One witness's cosignature lines for `note` (from its key only).
  Status AskOne(size_t i, uint64_t size, const std::string& note, std::vector<NoteSignature>* lines);
  Status Post(size_t i, uint64_t old_size, uint64_t size, const std::string& note, WitnessReply* reply);

  const merkle::SubtreeSource& tree_;
  const CosignedStore store_;
  const WitnessOptions options_;
  std::vector<uint64_t> known_;  // per witness, the size it last cosigned (thread only)
  mutable std::mutex mu_;
  std::condition_variable wake_;
  uint64_t offered_size_ = 0;  // guarded by mu_
  std::string offered_;        // guarded by mu_; empty when nothing waits
  bool stop_ = false;          // guarded by mu_
  Status last_error_;          // guarded by mu_
  std::atomic<uint64_t> cosigned_{0};
  std::thread thread_;
};

}  // namespace tollgate
