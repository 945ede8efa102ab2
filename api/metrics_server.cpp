#include "api/metrics_server.h"

#include <httplib.h>

#include <thread>

#include "api/metrics.h"
#include "api/tokens.h"

namespace tollgate {

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::string host;
  int port = 0;
};

namespace {

// An operator or admin token's principal (*who), or false.
bool MayScrape(const CredentialRegistry* credentials, const std::string& header, Principal* who) {
  return credentials != nullptr && BearerPrincipal(credentials, TokenStore(), header, who) &&
         (who->Has("operator") || who->admin());
}

}  // namespace

Status MetricsServer::Start(const std::string& listen, const CredentialRegistry* credentials,
                            bool public_access, std::function<std::string()> render,
                            std::unique_ptr<MetricsServer>* out) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return Status::Error(errc::kInvalidQuery, "--metrics wants HOST:PORT");
  std::unique_ptr<MetricsServer> m(new MetricsServer());
  m->impl_ = std::make_unique<Impl>();
  Impl* im = m->impl_.get();
  im->host = listen.substr(0, colon);
  const int port = std::atoi(listen.c_str() + colon + 1);
  im->server.Get(
      "/metrics", [credentials, public_access, render](const httplib::Request& req, httplib::Response& res) {
        Principal who;
        if (!public_access && !MayScrape(credentials, req.get_header_value("Authorization"), &who)) {
          res.status = 401;
          res.set_header("WWW-Authenticate", "Bearer");
          res.set_content(
              R"({"error":{"code":"E_UNAUTHORIZED","message":"an operator or admin token is needed"}})"
              "\n",
              "application/json");
          return;
        }
        // An org's operator or admin sees its org's series only.
        const std::string text = public_access ? render() : MetricsVisibleTo(who.org_id, render());
        res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
      });
  im->port = port == 0 ? im->server.bind_to_any_port(im->host)
                       : (im->server.bind_to_port(im->host, port) ? port : -1);
  if (im->port <= 0) return Status::Error(errc::kLogIO, "cannot listen on " + listen);
  im->thread = std::thread([im] { im->server.listen_after_bind(); });
  *out = std::move(m);
  return Status::Ok();
}

MetricsServer::~MetricsServer() {
  if (!impl_) return;
  for (int i = 0; i < 200 && !impl_->server.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::string MetricsServer::url() const {
  return "http://" + impl_->host + ":" + std::to_string(impl_->port) + "/metrics";
}

}  // namespace tollgate
