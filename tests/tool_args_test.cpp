// A seed's parameter is a real parameter (issue 29): http_request's `data`
// (the AI Orchestrator's JSON payload) is the body the server receives.
// Decided by the real policy engine, run by the real execute stage against
// a loopback server.
#include "tests/http_pipeline_fixture.h"

namespace tollgate {
namespace {

using testing::HttpPipelineTest;
using testing::RecordingServer;
using testing::Yaml;
using ToolArgsTest = HttpPipelineTest;

TEST_F(ToolArgsTest, TheSeedsDataArgumentIsTheJsonBodyThatReachesTheServer) {
  RecordingServer s;
  Load(Yaml(s, "  a1:\n    mode: dangerous\n    http_request: {allowed_methods: [GET, POST]}\n"));
  const Json args{{"url", s.origin() + "/orders"}, {"method", "POST"}, {"data", {{"item", "book"}, {"n", 2}}}};
  Json d = Decide("a1", "r-data", args);
  ASSERT_EQ(d["verdict"], "allow") << d.dump();
  Json r = Execute("a1", "r-data", args, d);
  EXPECT_TRUE(r.value("success", false)) << r.dump();
  ASSERT_EQ(s.bodies().size(), 1u);
  EXPECT_EQ(Json::parse(s.bodies()[0]), args["data"]) << "the payload went out, not an empty POST";
  EXPECT_EQ(s.last_headers().find("Content-Type")->second, "application/json");
  // json and data together are one payload too many.
  const Json both{{"url", s.origin() + "/orders"}, {"method", "POST"}, {"data", {{"a", 1}}}, {"json", {{"b", 2}}}};
  Json r2 = Execute("a1", "r-both", both, Decide("a1", "r-both", both));
  EXPECT_EQ(Code(r2), "E_INVALID_ARGS") << r2.dump();
  EXPECT_EQ(s.bodies().size(), 1u) << "nothing was sent";
}

}  // namespace
}  // namespace tollgate
