// A pipeline started by Pipeline::Start on a policy file, with a test agent
// that signs its requests and a consumer of the results topic: the harness
// of tests that act as an agent and read what the agent gets back.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "core/messages.h"
#include "deploy/pipeline.h"
#include "tests/agent_keys.h"
#include "tests/results_reader.h"
#include "tests/test_util.h"

namespace tollgate::testing {

class PolicyPipelineTest : public ::testing::Test {
 protected:
  // Writes `policy_text` to policy.yaml and starts the pipeline on it.
  void StartWith(const std::string& policy_text) {
    PipelineOptions o;
    o.data_dir = dir_.sub("data");
    o.durability = Durability::kBuffered;
    o.policy_path = dir_.sub("policy.yaml");
    std::ofstream(o.policy_path) << policy_text;
    ASSERT_TRUE(Pipeline::Start(o, &p_).ok());
    signers_ = std::make_unique<TestSigners>(*p_);
    bus_.brokers = p_->bootstrap();
    ASSERT_TRUE(Producer::Open(bus_, "", &producer_).ok());
    ASSERT_TRUE(ResultsReader::Open(bus_, p_->gate().public_b64url(), "test-results", &results_).ok());
  }
  void TearDown() override {
    if (p_) ExpectEveryEventConforms(p_->log().store());
    results_.reset();
    producer_.reset();
    signers_.reset();
    p_.reset();
  }

  // A request of agent-1 of org-1.
  static Json Request(const std::string& rid, const std::string& tool, Json args,
                      const std::string& session = "sess-1") {
    return {{"request_id", rid},     {"org_id", "org-1"}, {"agent_id", "agent-1"},
            {"session_id", session}, {"tool", tool},      {"args", std::move(args)}};
  }
  // Signs `req` as its agent and publishes it on tollgate.requests.
  void Send(const Json& req) {
    Message m = MessageFor(bus_.topics.requests(), req, req);
    signers_->SignRequest(&m);
    ASSERT_TRUE(producer_->Send(m).ok());
    ASSERT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
  }
  // The raw results (as produced), by request id, until `want` are in or 30 s.
  std::map<std::string, std::string> Collect(size_t want) {
    std::map<std::string, std::string> got;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
      std::vector<Message> batch;
      results_->Poll(100, std::chrono::milliseconds(100), &batch);
      for (auto& m : batch) got[m.headers[kHeaderRequestId]] = m.value;
    }
    return got;
  }
  // Sends one request and waits for its result (null after 30 s).
  Json Call(const std::string& rid, const std::string& tool, Json args,
            const std::string& session = "sess-1") {
    Send(Request(rid, tool, std::move(args), session));
    return Await(rid);
  }
  // The result of `rid` (null after 30 s).
  Json Await(const std::string& rid) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::vector<Message> batch;
      results_->Poll(100, std::chrono::milliseconds(100), &batch);
      for (auto& m : batch) {
        if (m.headers[kHeaderRequestId] == rid) return Json::parse(m.value);
      }
    }
    ADD_FAILURE() << "no result for " << rid;
    return Json();
  }

  TempDir dir_;
  std::unique_ptr<Pipeline> p_;
  std::unique_ptr<TestSigners> signers_;
  BusConfig bus_;
  std::unique_ptr<Producer> producer_;
  std::unique_ptr<ResultsReader> results_;
};

}  // namespace tollgate::testing
