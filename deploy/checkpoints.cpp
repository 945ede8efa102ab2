#include "deploy/checkpoints.h"

#include <curl/curl.h>

#include <mutex>

#include "core/credentials.h"
#include "core/jwt.h"

namespace tollgate {
namespace {

size_t Collect(char* data, size_t size, size_t n, void* out) {
  auto* body = static_cast<std::string*>(out);
  if (body->size() + size * n > kMaxNoteBytes) return 0;  // a witness's answer is a few lines
  body->append(data, size * n);
  return size * n;
}

// The witnesses' transport (audit/witness_client.h): libcurl, as the
// webhooks (observe/webhook.cpp), but keeping the answer and its type.
Status CurlPost(const std::string& url, const std::string& body, WitnessReply* reply) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* curl = curl_easy_init();
  if (!curl) return Status::Error("E_UNAVAILABLE", "curl_easy_init failed");
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: text/plain; charset=utf-8");
  headers = curl_slist_append(headers, "User-Agent: tollgate-witness-client/1");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10'000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // a background thread: no SIGALRM
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply->body);
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  char* type = nullptr;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
  reply->status = static_cast<int>(status);
  reply->content_type = type ? type : "";
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) return Status::Error("E_UNAVAILABLE", curl_easy_strerror(rc));
  return Status::Ok();
}

// The checkpoint key's credential.added, unless the log has it; a key the
// log shows revoked is refused (the deployment key must change first).
Status RegisterCheckpointKey(const NoteSigner& signer, CredentialRegistry* registry, EventSink& sink) {
  Credential c;
  c.kind = "checkpoint_key";
  c.identity = signer.name();
  c.org_id = kAllOrgs;
  c.public_key = Base64UrlEncode(signer.public_key());
  c.key_id = KeyIdOfPublicKey(c.public_key);
  c.added_by = "up";
  Credential known;
  if (registry->Find(c.key_id, &known)) {
    if (!known.revoked) return Status::Ok();
    return Status::Error(errc::kUnauthenticated, "the checkpoint key " + c.key_id +
                                                     " is revoked in the log; give the deployment a new key");
  }
  const Event e = CredentialAddedEvent(c, NowMicros());
  Status s = AppendOne(sink, e);
  if (s.ok()) registry->Apply(e);
  return s;
}

}  // namespace

Status StartCheckpoints(LocalLog& local, const EventsKey& key, CheckpointOptions options, Checkpoints* out,
                        EventSink* writer) {
  if (!options.witnesses.post) options.witnesses.post = CurlPost;
  NoteSigner signer;
  Status s = CheckpointSigner(key.Derive("checkpoint-key"), "", &signer);
  if (s.ok()) s = RegisterCheckpointKey(signer, local.credentials.get(), writer ? *writer : *local.sink);
  if (s.ok()) s = MerkleStore::Open(local.log->store(), &out->tree);
  if (s.ok()) {
    s = Checkpointer::Start(*out->tree, local.log->head_seq(), std::move(signer), options, local.sink.get(),
                            &out->checkpointer);
  }
  if (!s.ok()) return s;
  local.sink->Subscribe(out->checkpointer.get());
  return Status::Ok();
}

CheckpointOptions KeeperCheckpointOptions(CheckpointOptions options) {
  options.log_them = false;
  // A timer fires at different sizes in different keepers; a multiple of
  // every_events is the same size in all of them, and its checkpoint the
  // same bytes (the same key, tree and deterministic Ed25519).
  options.every = std::chrono::milliseconds(0);
  return options;
}

Json CheckpointKeyJson(const NoteSigner& signer) {
  return {{"origin", signer.name()},
          {"verifier_key", signer.VerifierKey()},
          {"public_key", Base64UrlEncode(signer.public_key())}};
}

}  // namespace tollgate
