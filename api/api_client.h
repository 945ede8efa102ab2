// A client of the HTTP API (docs/http_api.md) for the CLI's admin and
// approval commands: one call with a bearer token.
//
// It lives in tollgate_api, not in the CLI, because cpp-httplib is a
// compiled library: only a translation unit built with its feature macros
// (pkg-config's CPPHTTPLIB_*_SUPPORT, which tollgate_api has) sees its
// classes as the library does. The CLI includes no <httplib.h>.
#pragma once

#include <string>

#include "core/canonical_json.h"
#include "core/status.h"

namespace tollgate {

// True when `url` (e.g. "http://127.0.0.1:8080") answers GET /healthz with
// 200, or 503 while its log refuses appends (2 s to connect).
bool ApiAnswers(const std::string& url);

// METHOD (GET, DELETE, else POST with a JSON `body`) `path` with
// "Authorization: Bearer <token>". *status is the HTTP status, 0 when the
// API did not answer; *reply its JSON body ({} if none). Ok for a 2xx; else
// the error the reply names ({"error": {"code", "message"}}), or
// E_UNAVAILABLE, or E_HTTP_<status>.
Status ApiCall(const std::string& url, const std::string& token, const std::string& method,
               const std::string& path, const std::string& body, int* status, Json* reply);

// GET `path` of a route that answers text (GET /v1/audit/checkpoint,
// /proof, /consistency): *text its body on a 2xx, else the error as
// ApiCall gives it.
Status ApiGetText(const std::string& url, const std::string& token, const std::string& path,
                  std::string* text);

// `value` encoded for a query string or a path segment.
std::string EncodeQueryParam(const std::string& value);

}  // namespace tollgate
