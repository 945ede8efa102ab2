// The process background_process_crash_test kills: the embedded pipeline
// (deploy/pipeline.h) running background_process calls of agent o1/a1.
//   background_crash_child start DATA TOOLS CMD  spawns CMD (request
//       bp-spawn), prints its result as one JSON line once it has one, and
//       waits (the test kill -9's it);
//   background_crash_child list DATA TOOLS       starts the pipeline again,
//       calls list (request bp-list) and prints its result.
// Requests are ingested as ingest does (signed by a registered agent key)
// and go straight to execute with an allow decision carrying the
// invocation execute recomputes, as execute_crash_child's do.
#include <chrono>
#include <iostream>
#include <thread>

#include "core/auth.h"
#include "core/credentials.h"
#include "core/flow_stage.h"
#include "core/invocation.h"
#include "core/messages.h"
#include "deploy/pipeline.h"
#include "ingest/ingest_stage.h"
#include "tests/results_reader.h"

using namespace tollgate;

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const std::string mode = argv[1];
  PipelineOptions o;
  o.data_dir = argv[2];
  o.tools_dir = argv[3];
  o.partitions = 1;
  std::unique_ptr<Pipeline> p;
  if (Status s = Pipeline::Start(o, &p); !s.ok()) {
    std::cerr << "start: " << s.ToString() << "\n";
    return 3;
  }
  const std::string rid = mode == "start" ? "bp-spawn" : "bp-list";
  Json args = mode == "start" ? Json{{"action", "spawn"}, {"command", argc > 4 ? argv[4] : "sleep 600"}}
                              : Json{{"action", "list"}};
  BusConfig bus;
  bus.brokers = p->bootstrap();
  bus.topics = p->topics();
  std::unique_ptr<testing::ResultsReader> reader;
  if (!testing::ResultsReader::Open(bus, p->gate().public_b64url(), "bp-reader-" + mode, &reader, {"o1"})
           .ok())
    return 8;

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
  std::unique_ptr<Producer> producer;
  if (!Producer::Open(bus, "", &producer).ok()) return 7;
  Json req{{"request_id", rid},
           {"org_id", "o1"},
           {"agent_id", "a1"},
           {"session_id", "s1"},
           {"tool", "background_process"},
           {"args", args}};
  Message in{"tollgate.requests", 0, 0, "a1", req.dump(), {}};
  in.headers[kHeaderAuth] = SignRequest(signer, "o1", "a1", rid, in.value, NowMicros() / 1'000'000);
  StageResult received = ingest.Process(in, {NowMicros(), "child/requests/0/" + mode}, none);
  if (received.events.size() != 1 || received.events[0].type != "request.received") {
    std::cerr << "ingest refused: " << (received.events.empty() ? "" : received.events[0].data.dump())
              << "\n";
    return 4;
  }
  Flow flow;
  if (!Flow::FromJson(Json::parse(received.outputs[0].message.value), &flow)) return 5;
  const std::string action = args["action"];
  flow.decision = {{"verdict", "allow"},
                   {"reason", "crash test"},
                   {"rule", "test"},
                   {"danger_level", "HIGH"},
                   {"policy_version", "test"},
                   {"invocation", BuildInvocation("background_process", args, "", "GET", action)},
                   {"read_only", action == "list"}};
  if (std::string subject = FileSubject("background_process", args, action); !subject.empty()) {
    flow.decision["subject"] = subject;
  }
  AppendResult a = p->log().Append(received.events[0]);
  AppendResult b = p->log().Append(FlowEvent(flow, "decision.made", NowMicros(), flow.decision));
  if (!a.status.ok() || !b.status.ok()) return 6;
  producer->Send(MessageFor(p->topics().execute(), flow.request, flow.ToJson()));
  producer->Flush(std::chrono::seconds(10));

  Json result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (result.is_null() && std::chrono::steady_clock::now() < deadline) {
    std::vector<Message> got;
    reader->Poll(10, std::chrono::milliseconds(100), &got);
    for (const auto& m : got) {
      Json v = Json::parse(m.value, nullptr, false);
      if (v.is_object() && v.value("request_id", "") == rid) result = v;
    }
  }
  if (result.is_null()) {
    std::cerr << "no result for " << rid << "\n";
    return 9;
  }
  std::cout << result.dump() << std::endl;
  if (mode == "start") {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  reader->consumer().Close();
  p->Stop();
  return 0;
}
