#include "cli/identity.h"

#include <filesystem>

#include "api/tokens.h"
#include "audit/credentials_log.h"
#include "core/messages.h"

namespace tollgate {
namespace {

Status AppendOne(EventSink& sink, Event e) {
  std::vector<EventSink::Appended> appended;
  sink.AppendAll({std::move(e)}, &appended);
  if (appended.size() != 1) return Status::Error(errc::kInternal, "the log returned no result");
  return appended[0].status;
}

}  // namespace

std::string ServiceKeyPath(const std::string& data_dir) { return data_dir + "/keys/" + kServiceIdentity + ".pem"; }

Status SetUpIdentity(const IdentitySetup& setup, const LogStore& store, EventSink& sink,
                     CredentialRegistry* registry, std::shared_ptr<const JwtSigner>* service_signer,
                     bool* admin_token_created) {
  Status s = FoldCredentials(store, registry);
  if (!s.ok()) return s;
  const std::string tokens_path = setup.tokens_file.empty() ? setup.data_dir + "/tokens.json" : setup.tokens_file;
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
    s = AppendOne(sink, CredentialAddedEvent(c, NowMicros()));
    if (!s.ok()) return s;
    registry->Apply(CredentialAddedEvent(c, NowMicros()));
  }

  const std::string key_path = ServiceKeyPath(setup.data_dir);
  std::string pem, pub;
  if (!std::filesystem::exists(key_path)) {
    s = GenerateEd25519(&pem, &pub);
    if (s.ok()) s = WritePrivateKeyFile(key_path, pem);
    if (!s.ok()) return s;
  }
  s = ReadPrivateKeyFile(key_path, &pem);
  if (s.ok()) s = PublicKeyOf(pem, &pub);
  if (!s.ok()) return s;
  Credential svc;
  svc.kind = "service_key";
  svc.identity = kServiceIdentity;
  svc.org_id = "*";
  svc.roles = {"service"};
  svc.public_key = pub;
  svc.key_id = KeyIdOfPublicKey(pub);
  svc.added_by = "up";
  Credential known;
  if (!registry->Find(svc.key_id, &known)) {
    Event e = CredentialAddedEvent(svc, NowMicros());
    s = AppendOne(sink, e);
    if (!s.ok()) return s;
    registry->Apply(e);
  } else if (known.revoked) {
    return Status::Error(errc::kUnauthenticated, "the service key " + key_path +
                                                     " is revoked in the log; move it away to make a new one");
  }
  auto signer = std::make_shared<JwtSigner>();
  s = JwtSigner::FromPem(pem, signer.get(), svc.key_id);
  if (!s.ok()) return s;
  *service_signer = std::move(signer);
  return Status::Ok();
}

}  // namespace tollgate
