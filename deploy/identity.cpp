#include "deploy/identity.h"

#include <algorithm>
#include <filesystem>

#include "api/tokens.h"
#include "audit/credentials_log.h"
#include "core/messages.h"
#include "core/sha256.h"

namespace tollgate {
std::string ServiceKeyPath(const std::string& data_dir) {
  return data_dir + "/keys/" + kServiceIdentity + ".pem";
}

namespace {
// 16 hex digits of the key's derivation for `label`.
std::string SecretPart(const EventsKey& key, const std::string& label) {
  const std::string d = key.Derive(label);
  return ToHex(reinterpret_cast<const uint8_t*>(d.data()), std::min<size_t>(8, d.size()));
}
}  // namespace

std::string StageGroupId(const EventsKey& key, const std::string& stage) {
  return "tollgate-" + stage + "-" + SecretPart(key, "consumer-group/" + stage);
}

std::string StageTransactionalId(const EventsKey& key, const std::string& stage,
                                 const std::string& instance) {
  const std::string name = instance.empty() ? stage : stage + "-" + instance;
  return "tollgate-" + name + "-" + SecretPart(key, "transactional-id/" + name);
}

Status SetUpIdentity(const IdentitySetup& setup, const LogStore& store, EventSink& sink,
                     CredentialRegistry* registry, std::shared_ptr<const JwtSigner>* service_signer,
                     bool* admin_token_created) {
  Status s = FoldCredentials(store, registry);
  if (!s.ok()) return s;
  const std::string tokens_path =
      setup.tokens_file.empty() ? setup.data_dir + "/tokens.json" : setup.tokens_file;
  bool created = false;
  s = EnsureAdminToken(tokens_path, setup.data_dir + "/admin.token", &created);
  if (!s.ok()) return s;
  if (admin_token_created != nullptr) *admin_token_created = created;
  TokenStore file;
  s = TokenStore::Load(tokens_path, &file);
  if (!s.ok()) return s;
  for (const auto& [hash, p] : file.entries()) {
    Credential c;
    c.kind = "token";
    c.identity = p.identity;
    c.org_id = p.org_id;
    c.roles = p.roles;
    c.token_sha256 = hash;
    c.key_id = KeyIdOfToken(hash);
    c.added_by = "tokens-file";
    Credential known;
    if (registry->Find(c.key_id, &known)) continue;  // the log decides, revoked or not
    const Event e = CredentialAddedEvent(c, NowMicros());
    s = AppendOne(sink, e);
    if (!s.ok()) return s;
    registry->Apply(e);
  }

  const std::string key_path = ServiceKeyPath(setup.data_dir);
  std::string pem, pub;
  if (!std::filesystem::exists(key_path)) {
    s = GenerateEd25519(&pem, &pub);
    if (s.ok()) s = WritePrivateKeyFile(key_path, pem);
    if (!s.ok()) return s;
  }
  auto signer = std::make_shared<JwtSigner>();
  s = ReadPrivateKeyFile(key_path, &pem);
  if (s.ok()) s = SignerForKey(pem, signer.get());
  if (!s.ok()) return s;
  Credential svc;
  svc.kind = "service_key";
  svc.identity = kServiceIdentity;
  svc.org_id = "*";
  svc.roles = {"service"};
  svc.public_key = signer->public_b64url();
  svc.key_id = KeyIdOfPublicKey(svc.public_key);
  svc.added_by = "up";
  Credential known;
  if (!registry->Find(svc.key_id, &known)) {
    Event e = CredentialAddedEvent(svc, NowMicros());
    s = AppendOne(sink, e);
    if (!s.ok()) return s;
    registry->Apply(e);
  } else if (known.revoked) {
    return Status::Error(
        errc::kUnauthenticated,
        "the service key " + key_path + " is revoked in the log; move it away to make a new one");
  }
  *service_signer = std::move(signer);
  return Status::Ok();
}

}  // namespace tollgate
