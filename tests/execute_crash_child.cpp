// The process execute_crash_test kills: the embedded pipeline (deploy/pipeline.h)
// with a CLI tool dir, and one allowed call to a mutating CLI tool.
//   execute_crash_child start DATA TOOLS   logs the request and an allow
//       decision, publishes it to execute, prints "PUBLISHED", waits forever
//       (the test kill -9's it while the tool runs);
//   execute_crash_child resume DATA TOOLS  starts the pipeline again (its
//       reconciler re-drives the unfinished request to execute) and prints
//       the request's result as one JSON line.
// The request goes straight to execute because decide's slice policy (until
// the decide issue lands) allows only echo and current_time.
#include <chrono>
#include <iostream>
#include <thread>

#include "deploy/pipeline.h"
#include "core/auth.h"
#include "core/credentials.h"
#include "core/flow_stage.h"
#include "core/messages.h"
#include "ingest/ingest_stage.h"

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
  const std::string rid = "crash-1";
  if (mode == "start") {
    Json req{{"request_id", rid}, {"org_id", "o1"}, {"agent_id", "a1"}, {"session_id", "s1"},
             {"tool", "cli:slow_append"}, {"args", {{"n", 1}}}};
    // Received as ingest receives it: signed by an agent key registered in
    // the pipeline's log, as `tollgate agents add` does.
    Credential c;
    JwtSigner signer;
    if (!NewSigningKey("agent_key", "o1", "a1", {"agent"}, "test", &c, &signer).ok()) return 10;
    if (!p->AppendCredentialEvent(CredentialAddedEvent(c, NowMicros())).ok()) return 12;
    IngestConfig ic;
    ic.credentials = &p->credentials();
    IngestStage ingest{ic};
    Message in{"tollgate.requests", 0, 0, "a1", req.dump(), {}};
    in.headers[kHeaderAuth] = SignRequest(signer, "o1", "a1", rid, in.value, NowMicros() / 1'000'000);
    struct NoLog : LogView {
      Status EventsOfRequest(const std::string&, const std::string&, std::vector<Event>* out) const override {
        out->clear();
        return Status::Ok();
      }
    } none;
    StageResult received = ingest.Process(in, {NowMicros(), "child/requests/0/0"}, none);
    if (received.events.size() != 1 || received.events[0].type != "request.received") return 4;
    Flow flow;
    if (!Flow::FromJson(Json::parse(received.outputs[0].message.value), &flow)) return 5;
    flow.decision = {{"verdict", "allow"}, {"reason", "crash test"}, {"rule", "test"}, {"danger_level", "LOW"},
                     {"policy_version", "test"}, {"invocation", "cli:slow_append"}};
    AppendResult a = p->log().Append(received.events[0]);
    AppendResult b = p->log().Append(FlowEvent(flow, "decision.made", NowMicros(), flow.decision));
    if (!a.status.ok() || !b.status.ok()) return 6;
    BusConfig bus;
    bus.brokers = p->bootstrap();
    bus.topics = p->topics();
    std::unique_ptr<Producer> producer;
    if (!Producer::Open(bus, "", &producer).ok()) return 7;
    producer->Send(MessageFor(p->topics().execute(), flow.request, flow.ToJson()));
    producer->Flush(std::chrono::seconds(10));
    std::cout << "PUBLISHED" << std::endl;
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  BusConfig bus;
  bus.brokers = p->bootstrap();
  bus.topics = p->topics();
  std::unique_ptr<Consumer> c;
  if (!Consumer::Open(bus, "crash-reader", {p->topics().results()}, &c).ok()) return 8;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<Message> got;
    c->Poll(10, std::chrono::milliseconds(100), &got);
    for (const auto& m : got) {
      Json v = Json::parse(m.value, nullptr, false);
      if (v.is_object() && v.value("request_id", "") == rid) {
        std::cout << v.dump() << std::endl;
        c->Close();
        p->Stop();
        return 0;
      }
    }
  }
  std::cerr << "no result\n";
  return 9;
}
