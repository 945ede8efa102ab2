// The built-in tools against real files, and the traversal/symlink suite:
// every way out of the workspace is refused with E_PATH_FORBIDDEN.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "execute/tools/cli_tool.h"
#include "execute/workspace.h"
#include "tests/execute_test_util.h"

namespace tollgate {
namespace {

using testing::ToolFixture;

class ToolsTest : public ::testing::Test, public ToolFixture {};

TEST_F(ToolsTest, KernelHasOpenat2) { ASSERT_TRUE(Openat2Available().ok()) << Openat2Available().ToString(); }

TEST_F(ToolsTest, EchoAndCurrentTime) {
  Json r = Call("echo", {{"text", "hi"}});
  EXPECT_TRUE(r["success"]);
  EXPECT_EQ(r["data"]["text"], "hi");
  r = Call("current_time", Json::object());
  EXPECT_EQ(r["data"]["unix_ms"], 1'790'000'000'000);
}

TEST_F(ToolsTest, CalculateEvaluatesAndRefusesWhatIsNotArithmetic) {
  auto calc = [&](const std::string& e) { return Call("calculate", {{"expression", e}}); };
  EXPECT_DOUBLE_EQ(calc("1 + 2 * 3")["data"]["result"].get<double>(), 7);
  EXPECT_DOUBLE_EQ(calc("(1 + 2) * 3")["data"]["result"].get<double>(), 9);
  EXPECT_DOUBLE_EQ(calc("2 ^ 3 ^ 2")["data"]["result"].get<double>(), 512);
  EXPECT_DOUBLE_EQ(calc("-2 ^ 2")["data"]["result"].get<double>(), -4);
  EXPECT_DOUBLE_EQ(calc("sqrt(16) + max(1, 5, 3) - abs(-2)")["data"]["result"].get<double>(), 7);
  EXPECT_DOUBLE_EQ(calc("10 % 4")["data"]["result"].get<double>(), 2);
  EXPECT_DOUBLE_EQ(calc("1.5e3 / 3")["data"]["result"].get<double>(), 500);
  EXPECT_NEAR(calc("2 * pi")["data"]["result"].get<double>(), 6.283185307, 1e-6);
  // The seeds' Python spellings: ** is ^, // floors.
  EXPECT_DOUBLE_EQ(calc("2 ** 3 ** 2")["data"]["result"].get<double>(), 512);
  EXPECT_DOUBLE_EQ(calc("7 // 2")["data"]["result"].get<double>(), 3);
  EXPECT_DOUBLE_EQ(calc("-7 // 2")["data"]["result"].get<double>(), -4);
  EXPECT_DOUBLE_EQ(calc("2 * 3 ** 2")["data"]["result"].get<double>(), 18);
  for (const char* bad : {"1 / 0", "__import__('os')", "system(\"ls\")", "1 +", "(1", "2 ** ", "x", "1; 2",
                          "sqrt(-1)", "10 ^ 400", "", "pow(1)", "1 // 0", "2 *** 2"}) {
    Json r = calc(bad);
    EXPECT_FALSE(r["success"]) << bad;
    EXPECT_EQ(Code(r), "E_CALC_ERROR") << bad;
    EXPECT_EQ(r["error"]["alias"], "E_INVALID_ARGS") << bad;
  }
  EXPECT_EQ(Code(calc(std::string(200, '(') + "1" + std::string(200, ')'))), "E_CALC_ERROR")
      << "depth capped";
}

TEST_F(ToolsTest, WriteReadAppendListExistsDelete) {
  Json w = Call("write_file", {{"path", "notes/a.txt"}, {"content", "one\n"}});
  ASSERT_TRUE(w["success"]) << w.dump();
  EXPECT_TRUE(std::filesystem::exists(workspace() + "/notes/a.txt")) << "written under <root>/<org>/<agent>";
  ASSERT_TRUE(
      Call("write_file", {{"path", "notes/a.txt"}, {"content", "two\n"}, {"append", true}})["success"]);
  Json r = Call("read_file", {{"path", "notes/a.txt"}});
  EXPECT_EQ(r["data"]["content"], "one\ntwo\n");
  EXPECT_EQ(r["data"]["encoding"], "utf-8");
  ASSERT_TRUE(Call("write_file", {{"path", "notes/a.txt"}, {"content", "three"}})["success"]);
  EXPECT_EQ(Call("read_file", {{"path", "notes/a.txt"}})["data"]["content"], "three")
      << "no append: truncates";

  Write(workspace() + "/bin.dat", std::string("\xff\x00\x01", 3));
  r = Call("read_file", {{"path", "bin.dat"}});
  EXPECT_EQ(r["data"]["encoding"], "base64");
  EXPECT_EQ(r["data"]["content"], "/wAB");

  Json l = Call("list_directory", {{"path", "."}});
  ASSERT_TRUE(l["success"]);
  ASSERT_EQ(l["data"]["entries"].size(), 2u);
  EXPECT_EQ(l["data"]["entries"][0]["name"], "bin.dat");
  EXPECT_EQ(l["data"]["entries"][1]["type"], "directory");

  EXPECT_EQ(Call("file_exists", {{"path", "notes/a.txt"}})["data"]["exists"], true);
  EXPECT_EQ(Call("file_exists", {{"path", "notes/zzz"}})["data"]["exists"], false);
  EXPECT_TRUE(Call("delete_file", {{"path", "notes/a.txt"}})["success"]);
  EXPECT_FALSE(std::filesystem::exists(workspace() + "/notes/a.txt"));
  EXPECT_EQ(Code(Call("delete_file", {{"path", "notes/a.txt"}})), "E_FILE_NOT_FOUND");
  EXPECT_EQ(Code(Call("read_file", {{"path", "nope.txt"}})), "E_FILE_NOT_FOUND");
  EXPECT_EQ(Code(Call("read_file", {{"path", 5}})), "E_INVALID_ARGS");
}

// Issue 15: base64 content was decoded into itself (0 bytes written, the
// file truncated, success reported).
TEST_F(ToolsTest, ABase64WriteWritesTheDecodedBytes) {
  Write(workspace() + "/b.dat", "old content");
  Json w = Call("write_file", {{"path", "b.dat"}, {"content", "/wABaGk="}, {"encoding", "base64"}});
  ASSERT_TRUE(w["success"]) << w.dump();
  EXPECT_EQ(w["data"]["bytes_written"], 5);
  std::ifstream in(workspace() + "/b.dat", std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), std::string("\xff\x00\x01hi", 5));
  EXPECT_EQ(Code(Call("write_file", {{"path", "b.dat"}, {"content", "%%%"}, {"encoding", "base64"}})),
            "E_INVALID_ARGS");
}

// Issue 15: a too-long path failed only after creating thousands of nested
// directories. The limits are checked before anything is created.
TEST_F(ToolsTest, ATooLongPathCreatesNoDirectory) {
  std::string deep;
  for (int i = 0; i < 3001; ++i) deep += "d/";
  deep += "f.txt";
  EXPECT_EQ(Code(Call("write_file", {{"path", deep}, {"content", "x"}})), "E_PATH_FORBIDDEN");
  std::string many;
  for (int i = 0; i < 300; ++i) many += "d/";  // 600 bytes, 300 components
  EXPECT_EQ(Code(Call("write_file", {{"path", many + "f"}, {"content", "x"}})), "E_PATH_FORBIDDEN");
  EXPECT_EQ(Code(Call("write_file", {{"path", "x/" + std::string(256, 'n')}, {"content", "x"}})),
            "E_PATH_FORBIDDEN");
  EXPECT_FALSE(std::filesystem::exists(workspace() + "/d")) << "no directory was created";
  EXPECT_FALSE(std::filesystem::exists(workspace() + "/x"));
  ASSERT_TRUE(Call("write_file", {{"path", "ok/./a/../f.txt"}, {"content", "x"}})["success"]);
  EXPECT_TRUE(std::filesystem::exists(workspace() + "/ok/f.txt")) << "the normalised path is the one written";
}

// The path a file tool opens is the normalised path decide matched: a
// symlink followed by ".." does not lead somewhere else than decided.
TEST_F(ToolsTest, AFileToolOpensThePathDecideMatched) {
  Write(workspace() + "/private/sub/keep", "");
  Write(workspace() + "/private/x", "secret");
  Write(workspace() + "/pub/x", "public");
  ASSERT_EQ(symlink("../private/sub", (workspace() + "/pub/lnk").c_str()), 0);
  // Decided as read_file:pub/x (core/url.h NormalizePath).
  Json r = Call("read_file", {{"path", "pub/lnk/../x"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["content"], "public");
  ASSERT_TRUE(Call("write_file", {{"path", "pub/lnk/../y"}, {"content", "w"}})["success"]);
  EXPECT_TRUE(std::filesystem::exists(workspace() + "/pub/y"));
  EXPECT_FALSE(std::filesystem::exists(workspace() + "/private/y"));
}

TEST_F(ToolsTest, AgentsHaveSeparateWorkspaces) {
  ASSERT_TRUE(Call("write_file", {{"path", "x"}, {"content", "mine"}}, "o1", "a1")["success"]);
  EXPECT_EQ(Code(Call("read_file", {{"path", "x"}}, "o1", "a2")), "E_FILE_NOT_FOUND");
  EXPECT_EQ(Code(Call("read_file", {{"path", "../a1/x"}}, "o1", "a2")), "E_PATH_FORBIDDEN");
  EXPECT_EQ(Code(Call("read_file", {{"path", "../../o1/a1/x"}}, "o2", "a1")), "E_PATH_FORBIDDEN");
  EXPECT_EQ(Code(Call("read_file", {{"path", "x"}}, "..", "a1")), "E_PATH_FORBIDDEN")
      << "ids are names, not paths";
}

TEST_F(ToolsTest, CapsAndWriteSwitch) {
  policy().max_read_bytes = 10;
  policy().max_write_bytes = 10;
  Write(workspace() + "/big", std::string(11, 'x'));
  EXPECT_EQ(Code(Call("read_file", {{"path", "big"}})), "E_TOO_LARGE");
  EXPECT_EQ(Code(Call("write_file", {{"path", "w"}, {"content", std::string(11, 'x')}})), "E_TOO_LARGE");
  EXPECT_FALSE(std::filesystem::exists(workspace() + "/w"));
  policy().writes_enabled = false;
  EXPECT_EQ(Code(Call("write_file", {{"path", "w"}, {"content", "x"}})), "E_WRITE_DISABLED");
  EXPECT_EQ(Code(Call("delete_file", {{"path", "big"}})), "E_WRITE_DISABLED");
  EXPECT_TRUE(std::filesystem::exists(workspace() + "/big"));
}

TEST_F(ToolsTest, SearchFilesGlobsAndCaps) {
  for (const char* f : {"a.txt", "b.md", "sub/c.txt", "sub/deeper/d.txt"}) Write(workspace() + "/" + f, "x");
  Json r = Call("search_files", {{"pattern", "*.txt"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["matches"], Json::array({"a.txt", "sub/c.txt", "sub/deeper/d.txt"}));
  r = Call("search_files", {{"pattern", "*.txt"}, {"path", "sub"}});
  EXPECT_EQ(r["data"]["matches"], Json::array({"c.txt", "deeper/d.txt"}));
  r = Call("search_files", {{"pattern", "*"}, {"max_results", 2}});
  EXPECT_EQ(r["data"]["matches"].size(), 2u);
  EXPECT_EQ(r["data"]["truncated"], true);
  // A symlink to a directory outside is listed but never walked into.
  std::filesystem::create_directories(dir().sub("outside"));
  Write(dir().sub("outside/secret.txt"), "s");
  std::filesystem::create_directory_symlink(dir().sub("outside"), workspace() + "/link");
  r = Call("search_files", {{"pattern", "*secret*"}});
  EXPECT_TRUE(r["data"]["matches"].empty()) << r.dump();
  EXPECT_EQ(Code(Call("search_files", {{"pattern", "*"}, {"path", "link"}})), "E_PATH_FORBIDDEN");
}

// The traversal and symlink suite: each path must be refused, and nothing
// outside may be read, written or deleted.
TEST_F(ToolsTest, TraversalAndSymlinkSuite) {
  Write(dir().sub("secret.txt"), "top secret");
  Write(workspace() + "/ok.txt", "fine");
  std::filesystem::create_symlink(dir().sub("secret.txt"), workspace() + "/abs_link");
  std::filesystem::create_symlink("../../../secret.txt", workspace() + "/rel_link");
  std::filesystem::create_directory_symlink("/etc", workspace() + "/etc_link");
  std::filesystem::create_directory_symlink(dir().path(), workspace() + "/dir_link");
  std::filesystem::create_directories(workspace() + "/sub");
  std::filesystem::create_symlink("../../../../secret.txt", workspace() + "/sub/nested_link");
  std::filesystem::create_symlink("/proc/self/root/etc/passwd", workspace() + "/proc_link");
  std::filesystem::create_symlink("loop_b", workspace() + "/loop_a");
  std::filesystem::create_symlink("loop_a", workspace() + "/loop_b");
  const char* escapes[] = {"../secret.txt",
                           "../../../secret.txt",
                           "/etc/passwd",
                           "sub/../../../../secret.txt",
                           "./../../secret.txt",
                           "abs_link",
                           "rel_link",
                           "etc_link/passwd",
                           "dir_link/secret.txt",
                           "sub/nested_link",
                           "proc_link",
                           "/proc/self/root/etc/passwd",
                           "..",
                           "/",
                           "sub/../..",
                           "sub/../../../../../../../../../../etc/shadow",
                           "//etc/passwd"};
  for (const char* p : escapes) {
    Json r = Call("read_file", {{"path", p}});
    EXPECT_EQ(Code(r), "E_PATH_FORBIDDEN") << p << " -> " << r.dump();
    EXPECT_EQ(Code(Call("file_exists", {{"path", p}})), "E_PATH_FORBIDDEN") << p;
    EXPECT_EQ(Code(Call("list_directory", {{"path", p}})), "E_PATH_FORBIDDEN") << p;
  }
  EXPECT_NE(Code(Call("read_file", {{"path", "loop_a"}})), "") << "a symlink loop fails";
  for (const char* p :
       {"../evil.txt", "/tmp/evil.txt", "dir_link/evil.txt", "etc_link/evil", "sub/../../evil.txt"}) {
    EXPECT_EQ(Code(Call("write_file", {{"path", p}, {"content", "x"}})), "E_PATH_FORBIDDEN") << p;
  }
  // Writing through a symlink that points outside, by its name: refused.
  EXPECT_EQ(Code(Call("write_file", {{"path", "abs_link"}, {"content", "overwritten"}})), "E_PATH_FORBIDDEN");
  EXPECT_EQ(Code(Call("write_file", {{"path", "abs_link"}, {"content", "x"}, {"append", true}})),
            "E_PATH_FORBIDDEN");
  EXPECT_EQ(Code(Call("delete_file", {{"path", "../secret.txt"}})), "E_PATH_FORBIDDEN");
  EXPECT_EQ(Code(Call("delete_file", {{"path", "dir_link/secret.txt"}})), "E_PATH_FORBIDDEN");
  // Deleting a symlink removes the link, never its target.
  EXPECT_TRUE(Call("delete_file", {{"path", "abs_link"}})["success"]);
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(workspace() + "/abs_link")));
  std::ifstream in(dir().sub("secret.txt"));
  std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, "top secret") << "nothing outside changed";
  EXPECT_FALSE(std::filesystem::exists(dir().sub("evil.txt")));
  EXPECT_FALSE(std::filesystem::exists("/tmp/evil.txt"));
  // Inside-pointing symlinks still work.
  std::filesystem::create_symlink("ok.txt", workspace() + "/good_link");
  EXPECT_EQ(Call("read_file", {{"path", "good_link"}})["data"]["content"], "fine");
  EXPECT_EQ(Call("read_file", {{"path", "sub/../ok.txt"}})["data"]["content"], "fine");
}

TEST_F(ToolsTest, SystemInfoSaysLittle) {
  Json r = Call("get_system_info", Json::object());
  ASSERT_TRUE(r["success"]);
  EXPECT_EQ(r["data"]["os"], "Linux");
  EXPECT_GE(r["data"]["cpus"].get<int>(), 1);
  EXPECT_FALSE(r["data"].contains("hostname"));
}

class FakeAudit : public AuditReader {
 public:
  Status Query(const std::string& org, const Json& q, Json* page) override {
    last_org = org;
    last = q;
    *page = {{"events", Json::array({{{"type", "request.received"}}})}, {"next_cursor", ""}};
    return Status::Ok();
  }
  std::string last_org;
  Json last;
};

TEST_F(ToolsTest, GetAuditLogIsScopedByTheEnvelopeNotTheArgs) {
  FakeAudit fake;
  audit_ = &fake;
  Json r = Call("get_audit_log", {{"types", {"request.received"}}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(fake.last_org, "o1");
  EXPECT_EQ(fake.last["org_id"], "o1");
  EXPECT_EQ(fake.last["agent_id"], "a1");
  EXPECT_EQ(fake.last["session_id"], "s1") << "default scope: the calling session";
  r = Call("get_audit_log", {{"scope", "agent"}});
  EXPECT_FALSE(fake.last.contains("session_id"));
  EXPECT_EQ(fake.last["agent_id"], "a1");
  fake.last = nullptr;
  EXPECT_EQ(Code(Call("get_audit_log", {{"org_id", "o2"}})), "E_FORBIDDEN");
  EXPECT_EQ(Code(Call("get_audit_log", {{"agent_id", "a2"}})), "E_FORBIDDEN");
  EXPECT_EQ(Code(Call("get_audit_log", {{"session_id", "other"}})), "E_FORBIDDEN");
  EXPECT_TRUE(fake.last.is_null()) << "refused before any query";
  audit_ = nullptr;
  EXPECT_EQ(Code(Call("get_audit_log", Json::object())), "E_AUDIT_ERROR");
}

// The seeds' last_n: the newest N, oldest first, with their count.
class ThreeEvents : public AuditReader {
 public:
  Status Query(const std::string&, const Json& q, Json* page) override {
    last = q;
    Json ev = Json::array({{{"seq", 1}}, {{"seq", 2}}, {{"seq", 3}}});
    if (q.value("descending", false)) std::reverse(ev.begin(), ev.end());
    const size_t limit = q.value("limit", 100);
    if (ev.size() > limit) ev.erase(ev.begin() + static_cast<long>(limit), ev.end());
    *page = {{"events", ev}, {"next_cursor", ev.size() < 3 ? "c" : ""}};
    return Status::Ok();
  }
  Json last;
};

TEST_F(ToolsTest, GetAuditLogsLastNIsTheNewestEntriesOldestFirstWithTheirCount) {
  ThreeEvents three;
  audit_ = &three;
  Json r = Call("get_audit_log", {{"last_n", 2}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(three.last["limit"], 2);
  EXPECT_EQ(three.last["descending"], true);
  ASSERT_EQ(r["data"]["events"].size(), 2u);
  EXPECT_EQ(r["data"]["events"][0]["seq"], 2);
  EXPECT_EQ(r["data"]["events"][1]["seq"], 3);
  EXPECT_EQ(r["data"]["count"], 2);
  EXPECT_FALSE(r["data"].contains("next_cursor"));
  EXPECT_EQ(Call("get_audit_log", Json::object())["data"]["count"], 3);
  for (const Json& bad : {Json{{"last_n", 0}}, Json{{"last_n", "5"}}, Json{{"last_n", 5}, {"limit", 5}},
                          Json{{"last_n", 5}, {"descending", false}}}) {
    EXPECT_EQ(Code(Call("get_audit_log", bad)), "E_INVALID_ARGS") << bad.dump();
  }
  audit_ = nullptr;
}

void MakeCliTool(const std::string& tools, const std::string& name, const std::string& script,
                 const std::string& readme) {
  std::filesystem::create_directories(tools + "/" + name);
  std::ofstream(tools + "/" + name + "/run") << script;
  std::filesystem::permissions(tools + "/" + name + "/run", std::filesystem::perms(0755));
  std::ofstream(tools + "/" + name + "/README.md") << readme;
}

TEST_F(ToolsTest, CliToolsAreDiscoveredReloadedAndRun) {
  const std::string tools = dir().sub("tools");
  ToolRegistry reg(tools);
  reg.RegisterBuiltins();
  EXPECT_EQ(reg.Reload(), 0u) << "a missing dir has none";
  MakeCliTool(tools, "upper",
              "#!/bin/sh\nread line\necho "
              "\"{\\\"success\\\":true,\\\"data\\\":{\\\"got\\\":$line,\\\"cwd\\\":\\\"$(pwd)\\\"},"
              "\\\"meta\\\":{\\\"cost_usd\\\":0.25}}\"\n",
              "Uppercases things.");
  MakeCliTool(tools, "fails", "#!/bin/sh\necho oops >&2\nexit 3\n", "Always fails.");
  MakeCliTool(tools, "notjson", "#!/bin/sh\necho hello\n", "");
  MakeCliTool(tools, "bad name!", "#!/bin/sh\n", "");
  EXPECT_EQ(reg.Reload(), 3u) << "a reload picks up new tools";
  auto t = reg.Find("cli:upper");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->description(), "Uppercases things.");
  EXPECT_FALSE(t->ReadOnly(Json::object(), Json{{"verdict", "allow"}}))
      << "no read_only: mutating (fail closed)";
  EXPECT_TRUE(t->ReadOnly(Json::object(), Json{{"read_only", true}}));
  Json r = t->Run({{"k", 1}}, Ctx());
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["got"], Json({{"k", 1}})) << "args arrive as JSON on stdin";
  EXPECT_EQ(r["data"]["cwd"], workspace()) << "runs in the agent's workspace";
  EXPECT_DOUBLE_EQ(r["meta"]["cost_usd"].get<double>(), 0.25);
  r = reg.Find("cli:fails")->Run(Json::object(), Ctx());
  EXPECT_EQ(Code(r), "E_TOOL_EXEC");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("oops"), std::string::npos);
  r = reg.Find("cli:notjson")->Run(Json::object(), Ctx());
  EXPECT_EQ(Code(r), "E_TOOL_EXEC");
  std::filesystem::remove_all(tools + "/fails");
  EXPECT_EQ(reg.Reload(), 2u);
  EXPECT_FALSE(reg.Find("cli:fails"));
}

// A CLI tool's schema.json is its contract on every path: an argument it
// does not take, or one of the wrong type, is refused before it runs.
TEST_F(ToolsTest, ACliToolsSchemaRefusesArgumentsItDoesNotTakeBeforeItRuns) {
  const std::string tools = dir().sub("tools");
  ToolRegistry reg(tools);
  MakeCliTool(tools, "report", "#!/bin/sh\ncat >/dev/null\necho ran > ran.txt\necho '{\"ok\":1}'\n",
              "Reports.");
  std::ofstream(tools + "/report/schema.json")
      << R"({"type":"object","properties":{"days":{"type":"integer"}},"required":["days"],"additionalProperties":false})";
  ASSERT_EQ(reg.Reload(), 1u);
  auto t = reg.Find("cli:report");
  Json r = t->Run({{"days", 7}, {"format", "pdf"}}, Ctx());
  EXPECT_EQ(Code(r), "E_INVALID_ARGS");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("unknown argument 'format'"), std::string::npos)
      << r.dump();
  EXPECT_EQ(Code(t->Run({{"days", "seven"}}, Ctx())), "E_INVALID_ARGS");
  EXPECT_EQ(Code(t->Run(Json::object(), Ctx())), "E_INVALID_ARGS") << "days is required";
  EXPECT_FALSE(std::filesystem::exists(workspace() + "/ran.txt")) << "refused before it ran";
  EXPECT_TRUE(t->Run({{"days", 7}}, Ctx())["success"]);
  EXPECT_TRUE(std::filesystem::exists(workspace() + "/ran.txt"));
}

// A tool that exits without reading its stdin: writing the args to it
// fails with EPIPE. That is the tool's failure, reported as such; it must
// not raise SIGPIPE in tollgate (whose default would end every stage).
TEST_F(ToolsTest, AToolThatIgnoresItsStdinFailsAloneWithoutKillingTollgate) {
  const std::string tools = dir().sub("tools");
  ToolRegistry reg(tools);
  MakeCliTool(tools, "deaf", "#!/bin/sh\nexit 0\n", "Reads nothing.");
  ASSERT_EQ(reg.Reload(), 1u);
  // Far more than a pipe holds, so the write cannot finish before the exit.
  Json r = reg.Find("cli:deaf")->Run({{"blob", std::string(4 << 20, 'x')}}, Ctx());
  EXPECT_EQ(Code(r), "E_TOOL_EXEC") << r.dump().substr(0, 300);
  // Still here, and the next tool runs.
  MakeCliTool(tools, "ok", "#!/bin/sh\ncat >/dev/null\necho '{\"success\":true,\"data\":1}'\n", "");
  ASSERT_EQ(reg.Reload(), 2u);
  r = reg.Find("cli:ok")->Run({{"k", 1}}, Ctx());
  EXPECT_TRUE(r.value("success", false)) << r.dump();
}

TEST(ExecutePolicyTest, ParsesTheExecuteSectionAndRefusesBadValues) {
  Json j;
  ASSERT_TRUE(YamlToJson(R"(
http_request:
  allowed_methods: [GET, POST]
  timeout_ms: 9000
orgs:
  o1:
    agents:
      a1:
        http_request:
          base_url: http://127.0.0.1:8080/api/
          timeout_ms: 500
execute:
  workspace_root: /srv/ws
  writes_enabled: false
  max_read_bytes: 100
  network:
    allow_cidrs: [127.0.0.0/8, "::1/128"]
  commands:
    allow: [ls, cat]
    run_as: ""
    limits: {timeout_ms: 2000, processes: 10}
)",
                         &j)
                  .ok());
  ExecutePolicy p;
  ASSERT_TRUE(ExecutePolicyFromJson(j, "/data", &p).ok());
  EXPECT_EQ(p.workspace_root, "/srv/ws");
  EXPECT_FALSE(p.writes_enabled);
  EXPECT_EQ(p.max_read_bytes, 100u);
  EXPECT_EQ(p.allow_cidrs.size(), 2u);
  EXPECT_EQ(p.command_allowlist, (std::vector<std::string>{"ls", "cat"}));
  EXPECT_EQ(p.run_as, "");
  EXPECT_EQ(p.limits.timeout_ms, 2000);
  EXPECT_EQ(p.limits.processes, 10);
  // The top-level http_request is every agent's default, overridden key by key.
  EXPECT_EQ(p.AgentHttp("o1", "a1")["timeout_ms"], 500);
  EXPECT_EQ(p.AgentHttp("o1", "a1")["allowed_methods"], Json::array({"GET", "POST"}));
  const Json defaults{{"allowed_methods", {"GET", "POST"}}, {"timeout_ms", 9000}};
  EXPECT_EQ(p.AgentHttp("o1", "a2"), defaults);
  // The entry is o1's a1: another org's a1 gets the defaults, never its base_url.
  EXPECT_EQ(p.AgentHttp("o2", "a1"), defaults);
  EXPECT_EQ(p.tools_dir, "/data/tools");
  ASSERT_TRUE(ExecutePolicyFromJson(Json(), "/data", &p).ok());
  EXPECT_EQ(p.workspace_root, "/data/workspaces") << "absent: safe defaults";
  EXPECT_TRUE(p.allow_cidrs.empty());
  EXPECT_FALSE(
      ExecutePolicyFromJson({{"execute", {{"network", {{"allow_cidrs", {"10.0.0.0/33"}}}}}}}, "/d", &p).ok());
  EXPECT_FALSE(ExecutePolicyFromJson({{"execute", {{"writes_enabled", "yes"}}}}, "/d", &p).ok());
  EXPECT_FALSE(ExecutePolicyFromJson({{"execute", {{"max_read_bytes", -1}}}}, "/d", &p).ok());
}

}  // namespace
}  // namespace tollgate
