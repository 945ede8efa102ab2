// Signed checkpoints for a process that writes the log (audit/checkpointer.h;
// docs/log_format.md, "Checkpoints"): the Merkle tree opened and caught up,
// the checkpoint key derived from the deployment key (so every process of a
// deployment signs with the same one) and registered in the log as a
// `checkpoint_key` credential, and the checkpointer subscribed to the sink.
#pragma once

#include <memory>

#include "audit/checkpointer.h"
#include "audit/merkle_store.h"
#include "deploy/local_log.h"
#include "runtime/event_follower.h"

namespace tollgate {

struct Checkpoints {
  // Declared in this order so the checkpointer stops before the tree closes.
  std::unique_ptr<MerkleStore> tree;
  std::unique_ptr<Checkpointer> checkpointer;
};

// With options.witnesses and no transport given, the witnesses are asked
// over libcurl. The key's credential goes to `writer` (default local.sink:
// a process that writes its log itself; the distributed keeper gives its
// events-topic writer, so every copy of the log gets it).
Status StartCheckpoints(LocalLog& local, const EventsKey& key, CheckpointOptions options, Checkpoints* out,
                        EventSink* writer = nullptr);

// The distributed keeper's options (deploy/stage_service.h): every keeper
// folds the same topic into its own copy of the log, so it signs only at
// multiples of every_events (and on demand) and logs nothing: a
// checkpoint.signed appended locally would make the copies diverge.
CheckpointOptions KeeperCheckpointOptions(CheckpointOptions options);

// {"origin", "verifier_key", "public_key"} of a checkpoint signer: for
// endpoints.json and GET /v1/audit/checkpoint-key.
Json CheckpointKeyJson(const NoteSigner& signer);

}  // namespace tollgate
