#include "deploy/endpoints.h"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

namespace tollgate {
namespace {

// endpoints[key] when it is there (else *out is left as it is).
Status StringField(const Json& endpoints, const char* key, std::string* out) {
  auto it = endpoints.find(key);
  if (it == endpoints.end()) return Status::Ok();
  if (!it->is_string())
    return Status::Error(errc::kInvalidJson, std::string("endpoints.json: ") + key + " is not a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

// "HOST:PORT" or "http://HOST:PORT[/...]" -> PORT, else 0.
int PortOf(std::string address) {
  if (address.rfind("http://", 0) == 0) address = address.substr(7);
  address = address.substr(0, address.find('/'));
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return 0;
  int port = 0;
  const char* end = address.data() + address.size();
  auto [ptr, ec] = std::from_chars(address.data() + colon + 1, end, port);
  return ec == std::errc() && ptr == end && port > 0 && port <= 65535 ? port : 0;
}

// A random id for this process, made once.
const std::string& ProcessInstance() {
  static const std::string id = [] {
    std::random_device rd;
    char buf[24];
    std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
    return std::string(buf);
  }();
  return id;
}

}  // namespace

Status WriteEndpoints(const std::string& data_dir, const Json& endpoints) {
  const std::string path = data_dir + "/endpoints.json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << endpoints.dump(2) << "\n";
    if (!out) return Status::Error(errc::kLogIO, "cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Error(errc::kLogIO, "cannot write " + path + ": " + ec.message());
  return Status::Ok();
}

Status ReadEndpoints(const std::string& data_dir, Json* endpoints) {
  const std::string path = data_dir + "/endpoints.json";
  std::ifstream in(path);
  if (!in) {
    return Status::Error(errc::kNotFound, "no " + path + ": is `tollgate up --data " + data_dir +
                                              "` running? (or pass --brokers)");
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Status s = ParseJson(text, endpoints);
  if (s.ok() && !endpoints->is_object())
    return Status::Error(errc::kInvalidJson, path + " is not a JSON object");
  return s;
}

Json BusEndpoints(const BusConfig& bus) {
  return {{"bootstrap", bus.brokers},
          {"topic_prefix", bus.topics.prefix},
          {"shared_results_topic", bus.topics.shared_results},
          {"pid", getpid()},
          {"instance", ProcessInstance()}};
}

LastPorts ReadLastPorts(const std::string& data_dir) {
  LastPorts last;
  Json ep;
  if (!ReadEndpoints(data_dir, &ep).ok()) return last;
  std::string bootstrap, http;
  auto embedded = ep.find("embedded_broker");
  if (embedded != ep.end() && *embedded == true && StringField(ep, "bootstrap", &bootstrap).ok() &&
      bootstrap.find(',') == std::string::npos) {
    last.broker = PortOf(bootstrap);
  }
  if (StringField(ep, "http", &http).ok()) last.http = PortOf(http);
  return last;
}

std::string EndpointsServer(const std::string& data_dir, std::string* bootstrap) {
  Json ep;
  std::string at, instance;
  if (!ReadEndpoints(data_dir, &ep).ok() || !StringField(ep, "bootstrap", &at).ok() ||
      !StringField(ep, "instance", &instance).ok()) {
    return "";
  }
  if (instance.empty()) {
    auto pid = ep.find("pid");
    if (pid == ep.end() || !pid->is_number_integer()) return "";
    instance = "pid " + std::to_string(pid->get<int64_t>());
  }
  if (bootstrap != nullptr) *bootstrap = at;
  return instance + "@" + at;
}

Status ClientBus(const std::string& data_dir, const std::string& brokers, const std::string& topic_prefix,
                 BusConfig* bus) {
  bus->brokers = brokers;
  bus->topics.prefix = topic_prefix.empty() ? Topics().prefix : topic_prefix;
  if (!brokers.empty()) return Status::Ok();
  Json ep;
  Status s = ReadEndpoints(data_dir, &ep);
  if (!s.ok()) return s;
  s = StringField(ep, "bootstrap", &bus->brokers);
  if (s.ok() && topic_prefix.empty()) s = StringField(ep, "topic_prefix", &bus->topics.prefix);
  bus->topics.shared_results = ep.value("shared_results_topic", false) == true;
  return s;
}

Status ClientGateKeys(const std::string& data_dir, const std::string& gate_key,
                      std::vector<Ed25519Verifier>* out) {
  std::string pub = gate_key;
  if (pub.empty()) {
    Json ep;
    if (ReadEndpoints(data_dir, &ep).ok() && ep.contains("gate_key") && ep["gate_key"].is_object()) {
      pub = ep["gate_key"].value("public_key", "");
    }
  }
  if (pub.empty()) {
    return Status::Error(errc::kNotFound,
                         "no gate key to check results with: pass --gate-key (GET /v1/gate-key) or "
                         "--data of the deployment");
  }
  Ed25519Verifier v;
  Status s = Ed25519Verifier::FromPublic(pub, &v);
  if (!s.ok()) return s;
  out->push_back(std::move(v));
  return Status::Ok();
}

std::string EndpointsApiUrl(const std::string& data_dir) {
  Json ep;
  std::string url;
  if (!ReadEndpoints(data_dir, &ep).ok() || !StringField(ep, "http", &url).ok()) return "";
  return url;
}

}  // namespace tollgate
