// The credentials of a log (core/credentials.h), read from it: every
// credential.added and credential.revoked event in seq order, through the
// by-type index (not a scan of the whole log). Used at start by every
// process that checks identities, and by `tollgate agents|tokens list`.
#pragma once

#include "audit/log_store.h"
#include "core/credentials.h"

namespace tollgate {

Status FoldCredentials(const LogStore& store, CredentialRegistry* registry);

}  // namespace tollgate
