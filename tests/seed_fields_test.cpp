// The built-in tools answer with the fields and error codes the seeds
// document (shared/seeds/002 AI Orchestrator, 001 MVP, 000 Kaizen), as a
// superset of tollgate's own: each seed example run against real files, a
// real HTTP server on loopback and the execute stage, and each renamed
// code answering under the seed's name with the old one as error.alias.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "execute/execute_stage.h"
#include "execute/net_guard.h"
#include "execute/tools/file_common.h"
#include "execute/tools/path_recovery.h"
#include "tests/child_process.h"
#include "tests/execute_test_util.h"

namespace tollgate {
namespace {

using testing::ToolFixture;

class SeedFieldsTest : public ::testing::Test, public ToolFixture {
 protected:
  static Json Error(const Json& r) {
    return r.contains("error") && r["error"].is_object() ? r["error"] : Json();
  }
};

// --- read_file ---------------------------------------------------------------

TEST_F(SeedFieldsTest, ReadFileAnswersContentPathSizeLinesAndKaizensOutput) {
  Write(workspace() + "/backend/main.py", "import os\nprint(os.name)\nx = 1");
  Json r = Call("read_file", {{"path", "backend/main.py"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  const Json& d = r["data"];
  EXPECT_EQ(d["content"], "import os\nprint(os.name)\nx = 1");
  EXPECT_EQ(d["path"], "backend/main.py");
  EXPECT_EQ(d["size"], 30);
  EXPECT_EQ(d["lines"], 3) << "a last line without its newline counts";
  EXPECT_EQ(d["output"], d["content"]) << "Kaizen's callers read output";
  Write(workspace() + "/two.txt", "a\nb\n");
  EXPECT_EQ(Call("read_file", {{"path", "two.txt"}})["data"]["lines"], 2);
  Write(workspace() + "/empty.txt", "");
  EXPECT_EQ(Call("read_file", {{"path", "empty.txt"}})["data"]["lines"], 0);
}

// The seed's Auto-Recovery example: read_file("tests/test_api.py") with no
// tests/ at the top, but backend/tests and frontend/tests below.
TEST_F(SeedFieldsTest, AReadInAMissingDirectoryIsDirNotFoundRecoverableWithTheSeedsSuggestions) {
  Write(workspace() + "/backend/tests/test_api.py", "ok");
  Write(workspace() + "/frontend/tests/app.test.js", "ok");
  Write(workspace() + "/docs/tests.md", "a file named like it is no directory");
  Json r = Call("read_file", {{"path", "tests/test_api.py"}});
  ASSERT_FALSE(r["success"]);
  const Json e = Error(r);
  EXPECT_EQ(e["code"], "E_DIR_NOT_FOUND") << r.dump();
  EXPECT_EQ(e["alias"], "E_FILE_NOT_FOUND") << "what tollgate called it before";
  EXPECT_EQ(e["recoverable"], true);
  EXPECT_EQ(e["message"], "Directory not found: tests");
  EXPECT_EQ(e["missing"], "tests");
  EXPECT_EQ(e["suggestions"], Json::array({"backend/tests", "frontend/tests"}));
  // The LLM's retry with the suggestion works.
  EXPECT_TRUE(Call("read_file", {{"path", "backend/tests/test_api.py"}})["success"]);
}

TEST_F(SeedFieldsTest, AMissingFileIsFileNotFoundRecoverableWithSameNamesFirstThenNearMisses) {
  Write(workspace() + "/src/config.yaml", "a");
  Write(workspace() + "/src/Config.yml", "b");
  Write(workspace() + "/deploy/config.yml", "c");
  Json r = Call("read_file", {{"path", "src/config.yml"}});
  const Json e = Error(r);
  EXPECT_EQ(e["code"], "E_FILE_NOT_FOUND") << r.dump();
  EXPECT_EQ(e["recoverable"], true) << "the seed: recoverable";
  EXPECT_FALSE(e.contains("alias")) << "the same name as before";
  EXPECT_EQ(e["missing"], "src/config.yml");
  EXPECT_EQ(e["suggestions"], Json::array({"deploy/config.yml", "src/Config.yml", "src/config.yaml"}));
  // Nothing like it: an empty list, still the seed's code.
  r = Call("read_file", {{"path", "zzzzzzzz.bin"}});
  EXPECT_EQ(Error(r)["code"], "E_FILE_NOT_FOUND");
  EXPECT_EQ(Error(r)["suggestions"], Json::array());
}

TEST_F(SeedFieldsTest, AFileUsedAsADirectoryIsPathNotFound) {
  Write(workspace() + "/notes.txt", "x");
  Write(workspace() + "/old/notes.txt/readme", "the directory this agent meant");
  Json r = Call("read_file", {{"path", "notes.txt/readme"}});
  const Json e = Error(r);
  EXPECT_EQ(e["code"], "E_PATH_NOT_FOUND") << r.dump();
  EXPECT_EQ(e["recoverable"], true);
  EXPECT_EQ(e["alias"], "E_FILE_NOT_FOUND");
  EXPECT_EQ(e["missing"], "notes.txt");
  EXPECT_EQ(e["suggestions"], Json::array({"old/notes.txt"}));
}

// Suggestions come from the agent's own workspace only: a symlink (to a
// directory outside, or inside) is never walked into or offered, and the
// search reads a bounded number of names.
TEST_F(SeedFieldsTest, SuggestionsStayInTheWorkspaceAndAreBounded) {
  Write(dir().sub("outside/tests/secret.py"), "s");
  std::filesystem::create_directories(workspace() + "/a");
  std::filesystem::create_directory_symlink(dir().sub("outside"), workspace() + "/a/out");
  std::filesystem::create_directory_symlink(dir().sub("outside/tests"), workspace() + "/a/tests");
  Json r = Call("read_file", {{"path", "tests/secret.py"}});
  EXPECT_EQ(Error(r)["code"], "E_DIR_NOT_FOUND");
  EXPECT_EQ(Error(r)["suggestions"], Json::array()) << r.dump();
  // At most five, shallowest first.
  for (const char* d : {"p1", "p2", "p3", "p4", "p5", "p6"}) {
    std::filesystem::create_directories(workspace() + "/" + std::string(d) + "/lib");
  }
  std::filesystem::create_directories(workspace() + "/x/y/z/lib");  // depth 4: not looked at
  r = Call("list_directory", {{"path", "lib"}});
  EXPECT_EQ(Error(r)["code"], "E_DIR_NOT_FOUND");
  EXPECT_EQ(Error(r)["suggestions"], Json::array({"p1/lib", "p2/lib", "p3/lib", "p4/lib", "p5/lib"}));
  // Depth 3 is the limit.
  Workspace ws;
  ASSERT_TRUE(Workspace::Open(dir().path() + "/workspaces", "o1", "a1", &ws).ok());
  std::filesystem::create_directories(workspace() + "/q/r/deep");
  std::filesystem::create_directories(workspace() + "/q/r/s/deeper");
  EXPECT_EQ(RecoverySuggestions(ws, "deep", true), std::vector<std::string>{"q/r/deep"});
  EXPECT_TRUE(RecoverySuggestions(ws, "deeper", true).empty());
}

// --- write_file ------------------------------------------------------------

TEST_F(SeedFieldsTest, WriteFileAnswersTheSeedsSizeAndModeBesideTollgatesFields) {
  Json r = Call("write_file", {{"path", "output/result.txt"}, {"content", "Hello World"}, {"append", false}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["path"], "output/result.txt");
  EXPECT_EQ(r["data"]["size"], 11);
  EXPECT_EQ(r["data"]["mode"], "write");
  EXPECT_EQ(r["data"]["bytes_written"], 11);
  EXPECT_EQ(r["data"]["appended"], false);
  r = Call("write_file", {{"path", "output/result.txt"}, {"content", "!!"}, {"append", true}});
  EXPECT_EQ(r["data"]["mode"], "append");
  EXPECT_EQ(r["data"]["size"], 2) << "the bytes this call wrote";
  EXPECT_EQ(Call("read_file", {{"path", "output/result.txt"}})["data"]["content"], "Hello World!!");
  // No parents made: the missing directory is the seed's code.
  r = Call("write_file", {{"path", "nope/x.txt"}, {"content", "x"}, {"create_dirs", false}});
  EXPECT_EQ(Error(r)["code"], "E_DIR_NOT_FOUND") << r.dump();
  EXPECT_EQ(Error(r)["missing"], "nope");
  EXPECT_FALSE(std::filesystem::exists(workspace() + "/nope"));
}

TEST_F(SeedFieldsTest, WritesDisabledIsEWriteDisabledWithTheOldNameAsAlias) {
  policy().writes_enabled = false;
  for (const char* tool : {"write_file", "delete_file"}) {
    Json r = Call(tool, {{"path", "w"}, {"content", "x"}});
    EXPECT_EQ(Error(r)["code"], "E_WRITE_DISABLED") << tool;
    EXPECT_EQ(Error(r)["alias"], "E_WRITES_DISABLED") << tool;
    EXPECT_EQ(Error(r)["recoverable"], false) << "fatal in the seed";
  }
  EXPECT_FALSE(std::filesystem::exists(workspace() + "/w"));
}

TEST_F(SeedFieldsTest, AnEmptyOrNulPathOrOneNamingNoFileIsInvalidPath) {
  const std::string nul("a\0b", 3);
  for (const auto& [tool, args] :
       std::vector<std::pair<std::string, Json>>{{"read_file", {{"path", ""}}},
                                                 {"read_file", {{"path", nul}}},
                                                 {"file_exists", {{"path", ""}}},
                                                 {"delete_file", {{"path", ""}}},
                                                 {"write_file", {{"path", ""}, {"content", "x"}}},
                                                 {"write_file", {{"path", "."}, {"content", "x"}}},
                                                 {"write_file", {{"path", nul}, {"content", "x"}}},
                                                 {"list_directory", {{"path", nul}}}}) {
    Json r = Call(tool, args);
    EXPECT_EQ(Error(r)["code"], "E_INVALID_PATH") << tool << " " << args.dump() << " -> " << r.dump();
    EXPECT_EQ(Error(r)["alias"], "E_INVALID_ARGS") << tool;
  }
  EXPECT_TRUE(std::filesystem::is_empty(workspace())) << "nothing was written";
}

// --- list_directory, file_exists, delete_file, search_files ----------------

TEST_F(SeedFieldsTest, ListDirectoryEntriesCarryIsDirAndSizeWithCountAndKaizensOutput) {
  Write(workspace() + "/backend/app/main.py", "12345");
  std::filesystem::create_directories(workspace() + "/backend/app/api");
  Json r = Call("list_directory", {{"path", "backend/app"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  const Json& d = r["data"];
  EXPECT_EQ(d["path"], "backend/app");
  EXPECT_EQ(d["count"], 2);
  ASSERT_EQ(d["entries"].size(), 2u);
  EXPECT_EQ(d["entries"][0], Json({{"name", "api"}, {"type", "directory"}, {"is_dir", true}}));
  EXPECT_EQ(d["entries"][1], Json({{"name", "main.py"}, {"type", "file"}, {"is_dir", false}, {"size", 5}}));
  EXPECT_EQ(d["output"], Json::array({"api", "main.py"}));
  // A missing directory, and a file where a directory is wanted.
  r = Call("list_directory", {{"path", "backend/ap"}});
  EXPECT_EQ(Error(r)["code"], "E_DIR_NOT_FOUND");
  EXPECT_EQ(Error(r)["recoverable"], true);
  EXPECT_EQ(Error(r)["suggestions"], Json::array({"backend/app"})) << "a typo away";
  r = Call("list_directory", {{"path", "backend/app/main.py"}});
  EXPECT_EQ(Error(r)["code"], "E_LIST_ERROR") << "a file is there: nothing is missing " << r.dump();
  EXPECT_EQ(Error(r)["recoverable"], false);
}

TEST_F(SeedFieldsTest, FileExistsAnswersKaizensOutputAndDeleteNamesWhatIsMissing) {
  Write(workspace() + "/data/test.txt", "x");
  EXPECT_EQ(Call("file_exists", {{"path", "data/test.txt"}})["data"]["output"], "true");
  EXPECT_EQ(Call("file_exists", {{"path", "data/other.txt"}})["data"]["output"], "false");
  Json r = Call("file_exists", {{"path", "data/test.txt/deeper"}});
  EXPECT_EQ(r["data"]["exists"], false) << "under a file: not there, no error";
  r = Call("delete_file", {{"path", "data/tset.txt"}});
  EXPECT_EQ(Error(r)["code"], "E_FILE_NOT_FOUND");
  EXPECT_EQ(Error(r)["suggestions"], Json::array({"data/test.txt"}));
  r = Call("delete_file", {{"path", "gone/test.txt"}});
  EXPECT_EQ(Error(r)["code"], "E_DIR_NOT_FOUND");
  EXPECT_TRUE(std::filesystem::exists(workspace() + "/data/test.txt"));
}

TEST_F(SeedFieldsTest, SearchFilesAnswersCountPatternAndPathAndStopsAtTheSeedsHundred) {
  for (int i = 0; i < 150; ++i) Write(workspace() + "/backend/app/m" + std::to_string(1000 + i) + ".py", "x");
  Json r = Call("search_files", {{"pattern", "*.py"}, {"path", "backend/app"}});
  ASSERT_TRUE(r["success"]) << r.dump().substr(0, 300);
  EXPECT_EQ(r["data"]["pattern"], "*.py");
  EXPECT_EQ(r["data"]["path"], "backend/app");
  EXPECT_EQ(r["data"]["count"], 100) << "the seed's default";
  EXPECT_EQ(r["data"]["matches"].size(), 100u);
  EXPECT_EQ(r["data"]["truncated"], true);
  r = Call("search_files", {{"pattern", "*.py"}, {"path", "backend/app"}, {"max_results", 120}});
  EXPECT_EQ(r["data"]["count"], 120) << "max_results still sets it";
  policy().max_search_results = 130;
  r = Call("search_files", {{"pattern", "*.py"}, {"path", "backend/app"}, {"max_results", 1000}});
  EXPECT_EQ(r["data"]["count"], 130) << "never past execute.max_search_results";
  r = Call("search_files", {{"pattern", "*.py"}, {"path", "backend/tests"}});
  EXPECT_EQ(Error(r)["code"], "E_DIR_NOT_FOUND");
  EXPECT_EQ(Error(r)["missing"], "backend/tests");
}

// --- calculate ----------------------------------------------------------------

TEST_F(SeedFieldsTest, CalculateRunsTheSeedsExampleToAnIntegerAndUsesPythonsOperators) {
  Json r = Call("calculate", {{"expression", "(2 + 3) * 4 ** 2"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"], Json({{"expression", "(2 + 3) * 4 ** 2"}, {"result", 80}}));
  EXPECT_TRUE(r["data"]["result"].is_number_integer()) << r.dump();
  auto result = [&](const std::string& e) {
    return Call("calculate", {{"expression", e}})["data"]["result"];
  };
  EXPECT_EQ(result("7 / 2"), 3.5);
  EXPECT_TRUE(result("7 / 2").is_number_float());
  EXPECT_EQ(result("-7 // 2"), -4);
  EXPECT_EQ(result("-7 % 3"), 2) << "Python's: the divisor's sign";
  EXPECT_EQ(result("7 % -3"), -2);
  EXPECT_EQ(result("-2 ** 2"), -4);
  EXPECT_EQ(result("2 ** -1"), 0.5);
  EXPECT_EQ(result("- (3 - 5)"), 2);
  EXPECT_EQ(result("-0.0"), 0);
  for (const char* bad : {"1 / 0", "1 // 0", "5 % 0", "2 +", "__import__('os')", "10 ** 400", ""}) {
    Json e = Error(Call("calculate", {{"expression", bad}}));
    EXPECT_EQ(e["code"], "E_CALC_ERROR") << bad;
    EXPECT_EQ(e["alias"], "E_INVALID_ARGS") << bad;
    EXPECT_EQ(e["recoverable"], false) << bad;
  }
}

// --- get_audit_log ------------------------------------------------------------

class RecordingAudit : public AuditReader {
 public:
  Status Query(const std::string&, const Json& q, Json* page) override {
    last = q;
    if (!fail.empty()) return Status::Error(fail, "the log is closed");
    Json ev = Json::array({{{"seq", 1}}, {{"seq", 2}}});
    if (q.value("descending", false)) std::reverse(ev.begin(), ev.end());
    *page = {{"events", ev}, {"next_cursor", ""}};
    return Status::Ok();
  }
  Json last;
  std::string fail;
};

TEST_F(SeedFieldsTest, GetAuditLogAnswersEntriesBesideEventsWithCountAndTheSeedsDefaultOfTwenty) {
  RecordingAudit audit;
  audit_ = &audit;
  Json r = Call("get_audit_log", Json::object());
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(audit.last["limit"], 20) << "last_n defaults to 20";
  EXPECT_EQ(audit.last["descending"], true);
  EXPECT_EQ(r["data"]["entries"], r["data"]["events"]);
  EXPECT_EQ(r["data"]["entries"][0]["seq"], 1) << "the newest, oldest first";
  EXPECT_EQ(r["data"]["count"], 2);
  Call("get_audit_log", {{"last_n", 10}});
  EXPECT_EQ(audit.last["limit"], 10);
  Call("get_audit_log", {{"tool", "read_file"}});
  EXPECT_EQ(audit.last["limit"], 20) << "a filter narrows the newest 20";
  EXPECT_EQ(audit.last["tool"], "read_file");
  // A window of tollgate's own keeps its meaning: no default.
  for (const Json& own : {Json{{"limit", 5}}, Json{{"since", "2026-01-01T00:00:00Z"}}, Json{{"cursor", "c"}},
                          Json{{"descending", false}}}) {
    Call("get_audit_log", own);
    EXPECT_EQ(audit.last.value("limit", Json()), own.value("limit", Json())) << own.dump();
  }
  audit.fail = "E_LOG_CLOSED";
  Json e = Error(Call("get_audit_log", Json::object()));
  EXPECT_EQ(e["code"], "E_AUDIT_ERROR");
  EXPECT_EQ(e["alias"], "E_LOG_CLOSED") << "the log's own code";
  EXPECT_EQ(e["recoverable"], true);
  audit_ = nullptr;
  e = Error(Call("get_audit_log", Json::object()));
  EXPECT_EQ(e["code"], "E_AUDIT_ERROR");
  EXPECT_EQ(e["alias"], "E_TOOL_EXEC");
}

// --- get_system_info ----------------------------------------------------------

TEST_F(SeedFieldsTest, GetSystemInfoAnswersOsCpuMemoryDiskAndWorkspace) {
  Write(workspace() + "/a.txt", std::string(1000, 'x'));
  Write(workspace() + "/sub/b.txt", std::string(24, 'y'));
  Json r = Call("get_system_info", Json::object());
  ASSERT_TRUE(r["success"]) << r.dump();
  const Json& d = r["data"];
  EXPECT_EQ(d["os"], "Linux");
  EXPECT_GE(d["cpu_count"].get<int>(), 1);
  EXPECT_EQ(d["cpu_count"], d["cpus"]);
  EXPECT_GT(d["memory_total_gb"].get<double>(), 0);
  EXPECT_GT(d["disk"]["total_gb"].get<double>(), 0);
  EXPECT_LE(d["disk"]["free_gb"].get<double>(), d["disk"]["total_gb"].get<double>());
  EXPECT_EQ(d["workspace"]["path"], workspace()) << "where commands run";
  EXPECT_EQ(d["workspace"]["size_bytes"], 1024);
  EXPECT_EQ(d["workspace"]["files"], 2);
  EXPECT_EQ(d["workspace"]["truncated"], false);
  EXPECT_FALSE(d.contains("hostname"));
}

// --- http_request ---------------------------------------------------------------

class SeedHttpTest : public SeedFieldsTest {
 protected:
  void SetUp() override {
    Cidr lo;
    ASSERT_TRUE(ParseCidr("127.0.0.0/8", &lo));
    policy().allow_cidrs = {lo};
    server_.Get("/data", [](const httplib::Request&, httplib::Response& res) {
      res.set_header("ETag", "\"v1\"");
      res.set_content(R"({"items":[1,2]})", "application/json");
    });
    server_.Get("/text", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("plain", "text/plain");
    });
    server_.Post("/submit", [this](const httplib::Request& req, httplib::Response& res) {
      posted_ = req.body;
      res.status = 201;
      res.set_content(R"({"created":true})", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    tollgate::testing::WaitUntil([this] { return server_.is_running(); }, std::chrono::seconds(1));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::string posted_;
};

TEST_F(SeedHttpTest, AnHttpRequestAnswersStatusCodeHeadersAndBodyAndTheMvpsOkAndData) {
  Json r = Call("http_request", {{"url", Url("/data")}, {"method", "GET"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  const Json& d = r["data"];
  EXPECT_EQ(d["status_code"], 200);
  EXPECT_EQ(d["status"], 200);
  EXPECT_EQ(d["ok"], true);
  EXPECT_EQ(d["url"], Url("/data"));
  EXPECT_EQ(d["headers"]["content-type"], "application/json");
  EXPECT_EQ(d["headers"]["etag"], "\"v1\"");
  EXPECT_EQ(d["body"], R"({"items":[1,2]})") << "body: always, as text";
  EXPECT_EQ(d["json"], Json({{"items", {1, 2}}}));
  EXPECT_EQ(d["data"], d["json"]) << "the MVP's data: parsed";
  r = Call("http_request", {{"url", Url("/text")}});
  EXPECT_EQ(r["data"]["body"], "plain");
  EXPECT_EQ(r["data"]["data"], "plain");
  EXPECT_FALSE(r["data"].contains("json"));
}

TEST_F(SeedHttpTest, TheSeedsPostWithDataSendsTheBodyAndAnUnallowedMethodIsHttpMethod) {
  Json r = Call("http_request", {{"url", Url("/submit")}, {"method", "POST"}, {"data", {{"name", "Test"}}}});
  EXPECT_EQ(Error(r)["code"], "E_HTTP_METHOD") << r.dump();
  EXPECT_EQ(Error(r)["alias"], "E_METHOD_NOT_ALLOWED");
  EXPECT_TRUE(posted_.empty()) << "refused before sending";
  policy().orgs["o1"]["agents"]["a1"]["http_request"] = {{"allowed_methods", {"GET", "POST"}}};
  r = Call("http_request", {{"url", Url("/submit")}, {"method", "POST"}, {"data", {{"name", "Test"}}}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["status_code"], 201);
  EXPECT_EQ(Json::parse(posted_), Json({{"name", "Test"}}));
}

TEST_F(SeedHttpTest, AFailedConnectionIsHttpErrorWithTheOldNameAsAlias) {
  // A loopback port with nothing listening: refused at once.
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  close(s);
  Json r = Call("http_request", {{"url", "http://127.0.0.1:" + std::to_string(port) + "/"}});
  EXPECT_EQ(Error(r)["code"], "E_HTTP_ERROR") << r.dump();
  EXPECT_EQ(Error(r)["alias"], "E_HTTP");
  EXPECT_EQ(Error(r)["recoverable"], true);
}

// --- codes and the ToolResult ---------------------------------------------------

TEST(SeedCodes, OsPermissionErrorsAreEPermissionAndAFileOnTheWayIsPathNotFound) {
  // Unit level: the tests run as root, whom permissions do not stop.
  for (int err : {EACCES, EPERM}) {
    Json r = FailFrom(PathError(err, "x"));
    EXPECT_EQ(r["error"]["code"], "E_PERMISSION");
    EXPECT_EQ(r["error"]["alias"], "E_PATH_FORBIDDEN");
    EXPECT_EQ(r["error"]["recoverable"], false);
  }
  EXPECT_EQ(PathError(ENOTDIR, "a/b").code(), "E_PATH_NOT_FOUND");
  EXPECT_EQ(PathError(EXDEV, "../x").code(), "E_PATH_FORBIDDEN")
      << "leaving the workspace is still forbidden";
}

TEST(SeedCodes, EveryRenamedCodeCarriesItsOldNameAndNotFoundIsAlwaysRecoverable) {
  const std::pair<const char*, const char*> renamed[] = {
      {"E_WRITE_DISABLED", "E_WRITES_DISABLED"}, {"E_HTTP_ERROR", "E_HTTP"},
      {"E_HTTP_METHOD", "E_METHOD_NOT_ALLOWED"}, {"E_CALC_ERROR", "E_INVALID_ARGS"},
      {"E_READ_ERROR", "E_TOOL_EXEC"},           {"E_WRITE_ERROR", "E_TOOL_EXEC"},
      {"E_LIST_ERROR", "E_TOOL_EXEC"},           {"E_SEARCH_ERROR", "E_TOOL_EXEC"}};
  for (const auto& [code, old] : renamed) {
    EXPECT_EQ(ToolResultError(code, "m", false)["error"]["alias"], old) << code;
  }
  EXPECT_FALSE(ToolResultError("E_POLICY_DENIED", "m", false)["error"].contains("alias"));
  EXPECT_EQ(ToolResultErrorAs("E_AUDIT_ERROR", "E_LOG_IO", "m", true)["error"]["alias"], "E_LOG_IO");
  EXPECT_FALSE(ToolResultErrorAs("E_AUDIT_ERROR", "", "m", true)["error"].contains("alias"));
  for (const char* code : {"E_FILE_NOT_FOUND", "E_DIR_NOT_FOUND", "E_PATH_NOT_FOUND"}) {
    EXPECT_EQ(ToolResultError(code, "m", false)["error"]["recoverable"], true) << code;
  }
}

// The execute stage: meta.sandbox is false unless the tool says otherwise,
// and a tool's meta.command is kept.
class MetaTool : public Tool {
 public:
  std::string name() const override { return "meta_probe"; }
  std::string description() const override { return "sets meta"; }
  bool ReadOnly(const Json&, const Json&) const override { return true; }
  Json Run(const Json&, const ToolContext&) const override {
    Json r = ToolOk(Json::object());
    r["meta"] = {{"command", "pytest -v"}, {"sandbox", true}};
    return r;
  }
};

TEST(SeedMeta, TheExecuteStageSaysSandboxFalseUnlessTheToolSaysOtherwiseAndKeepsItsCommand) {
  testing::TempDir dir;
  ExecuteConfig c;
  c.policy = std::make_shared<ExecutePolicy>(DefaultExecutePolicy(dir.path()));
  ExecuteStage stage(c);
  stage.registry().Register(std::make_unique<MetaTool>());
  const Json request{{"request_id", "r1"}, {"org_id", "o1"}, {"agent_id", "a1"}, {"session_id", "s1"}};
  ResolvedCall echo{"echo", {{"text", "hi"}}, nullptr, nullptr};
  Json r = stage.RunTool(request, echo, Json{{"verdict", "allow"}}, 0);
  EXPECT_EQ(r["meta"]["sandbox"], false) << r.dump();
  EXPECT_TRUE(r["meta"].contains("duration_ms"));
  ResolvedCall probe{"meta_probe", Json::object(), nullptr, nullptr};
  r = stage.RunTool(request, probe, Json{{"verdict", "allow"}}, 0);
  EXPECT_EQ(r["meta"]["sandbox"], true);
  EXPECT_EQ(r["meta"]["command"], "pytest -v");
}

}  // namespace
}  // namespace tollgate
