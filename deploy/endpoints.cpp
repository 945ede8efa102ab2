#include "deploy/endpoints.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

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
          {"pid", getpid()}};
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
