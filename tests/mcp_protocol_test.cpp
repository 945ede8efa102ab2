// The pure parts of the MCP gateway's protocol (mcp/protocol.h): where a
// request stands, as progress messages and task statuses say it, and the
// 2026-07-28 header values.
#include <gtest/gtest.h>

#include "mcp/protocol.h"

namespace tollgate::mcp {
namespace {

Event Ev(const std::string& type, Json data = Json::object()) {
  Event e;
  e.type = type;
  e.request_id = "r1";
  e.org_id = "o";
  e.agent_id = "a";
  e.data = std::move(data);
  return e;
}

TEST(McpProtocol, ProgressCountsDistinctGrantsOfTheApproversNeeded) {
  std::vector<Event> events = {Ev(ev::kRequestReceived), Ev(ev::kDecisionMade, {{"verdict", "ask"}})};
  EXPECT_EQ(DescribeProgress(Summarize({events.begin(), events.begin() + 1})), "received");
  EXPECT_EQ(DescribeProgress(Summarize(events)), "decided");
  events.push_back(Ev(ev::kApprovalRequested,
                      {{"approvers_needed", 2}, {"deadline", "2026-11-27T10:00:00Z"}, {"args_hash", "h"}}));
  EXPECT_EQ(DescribeProgress(Summarize(events)),
            "awaiting approval: 0 of 2 approvals, expires at 2026-11-27T10:00:00Z");
  // The same approver twice is one grant.
  events.push_back(Ev(ev::kApprovalGranted, {{"approver", "alice"}, {"args_hash", "h"}}));
  events.push_back(Ev(ev::kApprovalGranted, {{"approver", "alice"}, {"args_hash", "h"}}));
  EXPECT_EQ(DescribeProgress(Summarize(events)),
            "awaiting approval: 1 of 2 approvals, expires at 2026-11-27T10:00:00Z");
  events.push_back(Ev(ev::kApprovalGranted, {{"approver", "bob"}, {"args_hash", "h"}}));
  events.push_back(Ev(ev::kExecutionStarted));
  EXPECT_EQ(DescribeProgress(Summarize(events)), "executing");
  EXPECT_EQ(DescribeProgress(Summarize({})), "");
}

TEST(McpProtocol, HeaderValuesInTheirBase64FormAreDecodedAndMalformedOnesAreEmpty) {
  EXPECT_EQ(DecodeHeaderValue("echo"), "echo");
  EXPECT_EQ(DecodeHeaderValue("=?base64?ZWNobw==?="), "echo");
  EXPECT_EQ(DecodeHeaderValue("=?base64?w6ljaG8=?="),
            "\xc3\xa9"
            "cho");
  EXPECT_EQ(DecodeHeaderValue("=?base64?ZW-obw?="), "");
  EXPECT_EQ(DecodeHeaderValue("=?base64?Z?="), "");
}

}  // namespace
}  // namespace tollgate::mcp
