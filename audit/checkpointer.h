// Checkpointer: keeps the log's Merkle tree (audit/merkle_store.h) level
// with the log and signs checkpoints of it (docs/log_format.md,
// "Checkpoints").
//
// An observer of the log (core/stage.h LogSubscriber): OnAppended only
// notes the highest durable seq and wakes its own thread, so neither the
// tree nor the signature is on the append path. That thread catches the
// tree up and, when it grew by `every_events` leaves or `every` passed
// with growth, signs a C2SP tlog-checkpoint (core/checkpoint.h) with the
// deployment's checkpoint key, stores it (MerkleStore::PutCheckpoint) and
// appends a `checkpoint.signed` event carrying it. That event is itself a
// leaf of the next checkpoint.
//
// Checkpoints of sizes that are multiples of `every_events` depend only
// on the log and the key (Ed25519 signatures are deterministic): two
// processes folding the same log sign identical ones.
//
// With witnesses (audit/witness_client.h) each new checkpoint is also
// offered to them; their cosignatures are added to the stored note on
// their own thread, so a slow or absent witness never delays signing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "audit/merkle_store.h"
#include "audit/witness_client.h"
#include "core/checkpoint.h"
#include "core/stage.h"

namespace tollgate {

struct CheckpointOptions {
  // Sign when the tree has grown by this many leaves since the last
  // checkpoint (at the multiple of it), or when `every` passed with any
  // growth. 0 turns the first rule off; a zero duration the second.
  uint64_t every_events = 1000;
  std::chrono::milliseconds every{10'000};
  // Append a checkpoint.signed event for each checkpoint (the embedded
  // deployment; false where another process writes the log).
  bool log_them = true;
  // Witnesses to cosign each checkpoint (none: no cosignatures).
  WitnessOptions witnesses;
};

class Checkpointer : public LogSubscriber {
 public:
  // `tree`, `sink` outlive this; `sink` may be null when !log_them.
  // Catches the tree up to `head_seq` before returning.
  static Status Start(MerkleStore& tree, uint64_t head_seq, NoteSigner signer, CheckpointOptions options,
                      EventSink* sink, std::unique_ptr<Checkpointer>* out);
  ~Checkpointer() override;  // stops the thread

  void OnAppended(const std::vector<Event>& events) override;

  // Catches the tree up to the durable head it has heard of and signs a
  // checkpoint of it now, unless the latest one already covers that size.
  // The signed note in *note.
  Status SignNow(std::string* note);
  // The latest signed checkpoint (E_NOT_FOUND before the first).
  Status Latest(std::string* note) const { return tree_.LatestCheckpoint(note); }
  const NoteSigner& signer() const { return signer_; }
  // The checkpoint key in the signed-note verifier-key form
  // (<origin>+<hex key hash>+<base64(0x01 || public key)>).
  std::string verifier_key() const { return signer_.VerifierKey(); }
  const std::string& origin() const { return signer_.name(); }
  // The last failure of the thread (catch-up, signing, appending).
  Status last_error() const;
  // The witnesses' client (null without witnesses): its last_error() says
  // why the latest checkpoint lacks its cosignatures.
  const Witnesses* witnesses() const { return witnesses_.get(); }

 private:
  Checkpointer(MerkleStore& tree, NoteSigner signer, CheckpointOptions options, EventSink* sink);
  void Run();
  bool Due(std::chrono::steady_clock::time_point last_signed) const;  // requires mu_
  Status SignAt(uint64_t size, std::string* note);                    // tree level with size
  void Failed(const Status& s);

  MerkleStore& tree_;
  const NoteSigner signer_;
  const CheckpointOptions options_;
  EventSink* sink_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  uint64_t heard_ = 0;   // the highest durable seq OnAppended saw; guarded by mu_
  uint64_t news_ = 0;    // the highest seq of any other event than ours; guarded by mu_
  uint64_t signed_ = 0;  // the size of the latest checkpoint; guarded by mu_
  bool stop_ = false;
  Status last_error_;
  std::mutex sign_mu_;  // one signature at a time (thread and SignNow)
  std::unique_ptr<Witnesses> witnesses_;
  std::thread thread_;
};

// The deployment's checkpoint signer: an Ed25519 key derived from `seed`
// (the deployment key's "checkpoint-key" derivation), named
// "tollgate/<16 hex digits of SHA-256 of its public key>" unless `origin`
// is given.
Status CheckpointSigner(std::string_view seed, const std::string& origin, NoteSigner* out);

// The checkpoint.signed event of `cp` (docs/log_format.md).
Event CheckpointSignedEvent(const Checkpoint& cp, const std::string& note, int64_t time_us);

}  // namespace tollgate
