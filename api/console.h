// The web console (docs/console.md): static files under console/, compiled
// into the binary (console/embed_console.cmake) and served by the API's
// HTTP server at / and /console/<file>. Nothing is fetched from elsewhere.
//
// The console is a client of the /v1 API like any other: it holds the
// bearer token in the browser's session storage and sends it in a header,
// so there is no ambient credential to forge a request with (no cookie, no
// CSRF). Every response carries the headers of ConsoleSecurityHeaders: the
// page runs only its own scripts (no inline script, no eval), loads nothing
// from other origins and cannot be framed.
#pragma once

#include <string_view>
#include <vector>

namespace httplib {
class Server;
}

namespace tollgate {

struct ConsoleAsset {
  std::string_view name;  // file name under console/, e.g. "app.js"
  std::string_view content_type;
  std::string_view body;
};

// Every file of console/ (generated at build time).
const std::vector<ConsoleAsset>& ConsoleAssets();

// The Content-Security-Policy of the console's pages.
inline constexpr const char* kConsoleCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// GET / (index.html) and GET /console/<file>; unknown files are 404.
void ServeConsole(httplib::Server& server);

}  // namespace tollgate
