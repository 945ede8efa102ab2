#include "api/console.h"

#include <httplib.h>

namespace tollgate {
namespace {

const ConsoleAsset* Find(std::string_view name) {
  for (const ConsoleAsset& a : ConsoleAssets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

void Serve(const ConsoleAsset& a, httplib::Response& res) {
  res.status = 200;
  res.set_header("Content-Security-Policy", kConsoleCsp);
  // The files change only with the binary; a restart after an upgrade must
  // not leave a browser on old modules that call a newer API.
  res.set_header("Cache-Control", "no-cache");
  res.set_content(std::string(a.body), std::string(a.content_type));
}

}  // namespace

void ServeConsole(httplib::Server& svr) {
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    if (const ConsoleAsset* a = Find("index.html")) Serve(*a, res);
  });
  svr.Get(R"(/console/([A-Za-z0-9_.-]+))", [](const httplib::Request& req, httplib::Response& res) {
    const ConsoleAsset* a = Find(req.matches[1].str());
    if (a == nullptr) {
      res.status = 404;  // the server's error handler writes the JSON body
      return;
    }
    Serve(*a, res);
  });
}

}  // namespace tollgate
