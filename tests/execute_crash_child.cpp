// The process execute_crash_test kills: the embedded pipeline (deploy/pipeline.h)
// with a CLI tool dir, and two allowed calls to a CLI tool: crash-1, which
// decide calls mutating, and crash-2, which it calls read-only (as it
// records a CLI tool the policy says is read-only).
//   execute_crash_child start DATA TOOLS   logs the requests and their allow
//       decisions, publishes them to execute, prints "PUBLISHED", waits
//       forever (the test kill -9's it while the tools run);
//   execute_crash_child resume DATA TOOLS  starts the pipeline again (its
//       reconciler re-drives the unfinished requests to execute) and prints
//       each request's result as one JSON line, in request order.
// The request goes straight to execute because decide's slice policy (until
// the decide issue lands) allows only echo and current_time.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "core/auth.h"
#include "core/credentials.h"
#include "core/flow_stage.h"
#include "core/messages.h"
#include "deploy/pipeline.h"
#include "ingest/ingest_stage.h"
#include "tests/results_reader.h"

using namespace tollgate;

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const std::string mode = argv[1];
  PipelineOptions o;
  o.data_dir = argv[2];
  o.tools_dir = argv[3];
  o.partitions = 1;
  std::unique_ptr<Pipeline> p;
  Status s = Pipeline::Start(o, &p);
  if (!s.ok()) {
    std::cerr << "start: " << s.ToString() << "\n";
    return 3;
  }
  const std::vector<std::string> rids = {"crash-1", "crash-2"};
  if (mode == "start") {
    // Received as ingest receives them: signed by an agent key registered in
    // the pipeline's log, as `tollgate agents add` does.
    Credential c;
    JwtSigner signer;
    if (!NewSigningKey("agent_key", "o1", "a1", {"agent"}, "test", &c, &signer).ok()) return 10;
    if (!p->AppendCredentialEvent(CredentialAddedEvent(c, NowMicros())).ok()) return 12;
    IngestConfig ic;
    ic.credentials = &p->credentials();
    IngestStage ingest{ic};
    struct NoLog : LogView {
      Status EventsOfRequest(const std::string&, const std::string&, std::vector<Event>* out) const override {
        out->clear();
        return Status::Ok();
      }
    } none;
    BusConfig bus;
    bus.brokers = p->bootstrap();
    bus.topics = p->topics();
    std::unique_ptr<Producer> producer;
    if (!Producer::Open(bus, "", &producer).ok()) return 7;
    for (size_t i = 0; i < rids.size(); ++i) {
      const std::string& rid = rids[i];
      Json req{{"request_id", rid},         {"org_id", "o1"},        {"agent_id", "a1"}, {"session_id", "s1"},
               {"tool", "cli:slow_append"}, {"args", {{"n", i + 1}}}};
      Message in{"tollgate.requests", 0, static_cast<int64_t>(i), "a1", req.dump(), {}};
      in.headers[kHeaderAuth] = SignRequest(signer, "o1", "a1", rid, in.value, NowMicros() / 1'000'000);
      StageResult received = ingest.Process(in, {NowMicros(), "child/requests/0/" + std::to_string(i)}, none);
      if (received.events.size() != 1 || received.events[0].type != "request.received") return 4;
      Flow flow;
      if (!Flow::FromJson(Json::parse(received.outputs[0].message.value), &flow)) return 5;
      flow.decision = {{"verdict", "allow"},       {"reason", "crash test"},
                       {"rule", "test"},           {"danger_level", "LOW"},
                       {"policy_version", "test"}, {"invocation", "cli:slow_append"}};
      if (rid == "crash-2") flow.decision["read_only"] = true;
      AppendResult a = p->log().Append(received.events[0]);
      AppendResult b = p->log().Append(FlowEvent(flow, "decision.made", NowMicros(), flow.decision));
      if (!a.status.ok() || !b.status.ok()) return 6;
      producer->Send(MessageFor(p->topics().execute(), flow.request, flow.ToJson()));
    }
    producer->Flush(std::chrono::seconds(10));
    std::cout << "PUBLISHED" << std::endl;
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  BusConfig bus;
  bus.brokers = p->bootstrap();
  bus.topics = p->topics();
  // The org's results, signed by the gate, as an agent reads them.
  std::unique_ptr<testing::ResultsReader> c;
  Status opened = testing::ResultsReader::Open(bus, p->gate().public_b64url(), "crash-reader", &c, {"o1"});
  if (!opened.ok()) return 8;
  std::map<std::string, Json> results;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (results.size() < rids.size() && std::chrono::steady_clock::now() < deadline) {
    std::vector<Message> got;
    c->Poll(10, std::chrono::milliseconds(100), &got);
    for (const auto& m : got) {
      Json v = Json::parse(m.value, nullptr, false);
      if (v.is_object() && std::count(rids.begin(), rids.end(), v.value("request_id", ""))) {
        results.emplace(v.value("request_id", ""), v);
      }
    }
  }
  c->consumer().Close();
  p->Stop();
  if (results.size() < rids.size()) {
    std::cerr << "results for " << results.size() << " of " << rids.size() << " requests\n";
    return 9;
  }
  for (const auto& [rid, v] : results) std::cout << v.dump() << std::endl;
  return 0;
}
