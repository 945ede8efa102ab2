// DATA/endpoints.json: where a running `up`, `broker` or keeper (`stage
// audit`) serves, so the other subcommands find it from --data alone.
//
//   bootstrap      the Kafka bootstrap servers
//   shared_results_topic  results on one topic (--shared-results-topic)
//   gate_key       {key_id, public_key, alg}: results are signed with it
//   topic_prefix   the topics' prefix
//   pid            the writer's process id
//   instance       a random id of the writing process, new at each start
//                  (a restart shows even where pids repeat, as in a
//                  container): clients that wait across restarts watch it
//   and, as the writer has them: log (its log directory), http (its HTTP
//   API's base URL), embedded_broker, keeper.
#pragma once

#include <string>
#include <vector>

#include "core/canonical_json.h"
#include "core/jwt.h"
#include "core/status.h"
#include "runtime/kafka_bus.h"

namespace tollgate {

// Replaces DATA/endpoints.json whole (write then rename: a reader never
// sees half a file).
Status WriteEndpoints(const std::string& data_dir, const Json& endpoints);
// E_NOT_FOUND (naming `tollgate up --data DATA`) when there is none.
Status ReadEndpoints(const std::string& data_dir, Json* endpoints);

// The endpoints every writer records for the bus it serves: bootstrap,
// topic_prefix, this process's pid and instance. Writers add their own
// fields.
Json BusEndpoints(const BusConfig& bus);

// The ports a last run recorded in DATA/endpoints.json, for `up` to reuse
// when they are free: 0 for each it did not record (no file, an external
// broker, no HTTP API, a value that is not a port).
struct LastPorts {
  int broker = 0;  // the embedded broker's bootstrap port
  int http = 0;    // the HTTP API's port
};
LastPorts ReadLastPorts(const std::string& data_dir);

// Who serves DATA now, as endpoints.json says: "instance@bootstrap" (pid
// for files written before instance existed), and the bootstrap in
// *bootstrap when not null. "" when there is no readable file. A client
// that sees it change knows the server restarted (the embedded broker's
// contents with it) and reconnects.
std::string EndpointsServer(const std::string& data_dir, std::string* bootstrap = nullptr);

// The bus a client subcommand (submit, ...) talks to, from its --data,
// --brokers and --topic-prefix flags (empty: not given). --brokers wins and
// then endpoints.json is not read: the prefix is --topic-prefix, else the
// default. Without --brokers, endpoints.json's bootstrap, and its
// topic_prefix unless --topic-prefix is given. Fails as ReadEndpoints when
// neither names a broker.
Status ClientBus(const std::string& data_dir, const std::string& brokers, const std::string& topic_prefix,
                 BusConfig* bus);

// The gate's public key that results are checked with
// (core/result_signature.h): `gate_key` (base64url, from GET
// /v1/gate-key) when given, else endpoints.json's gate_key.public_key.
// E_NOT_FOUND when neither has one.
Status ClientGateKeys(const std::string& data_dir, const std::string& gate_key,
                      std::vector<Ed25519Verifier>* out);

// The HTTP API's base URL endpoints.json records; "" when there is no file
// or its writer serves no API. Whether it answers is the caller's to ask.
std::string EndpointsApiUrl(const std::string& data_dir);

}  // namespace tollgate
