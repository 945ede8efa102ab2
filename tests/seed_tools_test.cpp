// The AI Orchestrator seed's tools that tollgate added (get_datetime,
// list_llm_models, search_directory and the QA tools): each documented
// example through the tool, against real files, real git, pytest, npm and a
// real loopback HTTP server, asserting the seed's fields; then through the
// whole pipeline (a signed request on Kafka) to a completed result.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "execute/sandbox.h"
#include "tests/child_process.h"
#include "tests/execute_test_util.h"
#include "tests/pipeline_fixture.h"

namespace tollgate {
namespace {

using testing::RunCommand;
using testing::ToolFixture;

bool Contains(const Json& s, const std::string& what) {
  return s.is_string() && s.get<std::string>().find(what) != std::string::npos;
}

class SeedToolsTest : public ::testing::Test, public ToolFixture {
 protected:
  // A file of the workspace, with its directories.
  void Put(const std::string& rel, const std::string& content) { Write(workspace() + "/" + rel, content); }
  void Mkdir(const std::string& rel) { std::filesystem::create_directories(workspace() + "/" + rel); }
  // git in the workspace, as the test (root), with no host configuration.
  void Git(const std::string& args) {
    auto r = RunCommand("cd '" + workspace() +
                        "' && GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git -c "
                        "user.name=t -c user.email=t@example.com " +
                        args + " >/dev/null 2>&1");
    ASSERT_EQ(r.exit_code, 0) << "git " << args;
  }
  // A repository on branch main with one commit of app.py.
  void Repo() {
    Put("app.py", "print('hello')\n");
    Git("init -q -b main");
    Git("add app.py");
    Git("commit -q -m first");
  }
};

// ---- get_datetime ----------------------------------------------------------

TEST_F(SeedToolsTest, GetDatetimeGivesTheSeedsFormatsOfTheStageClockInUtc) {
  Json r = Call("get_datetime", Json::object());  // the fixture's clock: 1790000000 s
  ASSERT_TRUE(r["success"]) << r.dump();
  const Json& d = r["data"];
  EXPECT_EQ(d["datetime"], "2026-09-21T14:13:20+00:00");
  EXPECT_EQ(d["date"], "2026-09-21");
  EXPECT_EQ(d["time"], "14:13:20");
  EXPECT_EQ(d["timestamp"], 1790000000);
  EXPECT_EQ(d["timezone"], "UTC");
  EXPECT_EQ(d["iso"], "2026-09-21T14:13:20.000000Z");
}

// ---- list_llm_models -------------------------------------------------------

// The seed's example names, one or more per category.
const std::vector<std::string> kSeedModels = {
    "qwen2.5:7b",    "mistral:7b",         "llama3:8b",        "deepseek-chat", "deepseek-coder:33b",
    "codellama:13b", "codegemma:7b",       "starcoder2:3b",    "llava:13b",     "bakllava:7b",
    "bge-m3:latest", "qwen3-embedding:8b", "kimi-k2:1t-cloud", "moonshot-v1"};

void ExpectSeedGroups(const Json& r) {
  ASSERT_TRUE(r["success"]) << r.dump();
  const Json& m = r["data"]["models"];
  EXPECT_EQ(m["general"], (Json{"qwen2.5:7b", "mistral:7b", "llama3:8b", "deepseek-chat"}));
  EXPECT_EQ(m["code"], (Json{"deepseek-coder:33b", "codellama:13b", "codegemma:7b", "starcoder2:3b"}));
  EXPECT_EQ(m["vision"], (Json{"llava:13b", "bakllava:7b"}));
  EXPECT_EQ(m["embedding"], (Json{"bge-m3:latest", "qwen3-embedding:8b"}));
  EXPECT_EQ(m["cloud"], (Json{"kimi-k2:1t-cloud", "moonshot-v1"}));
  EXPECT_EQ(r["data"]["count"], kSeedModels.size());
}

TEST_F(SeedToolsTest, ListLlmModelsGroupsAConfiguredListByTheSeedsCategories) {
  policy().llm_models = kSeedModels;
  Json r = Call("list_llm_models", Json::object());
  ExpectSeedGroups(r);
  EXPECT_EQ(r["data"]["source"], "config");
}

TEST_F(SeedToolsTest, ListLlmModelsWithNothingConfiguredIsAClearError) {
  Json r = Call("list_llm_models", Json::object());
  EXPECT_EQ(Code(r), "E_NOT_CONFIGURED") << r.dump();
  EXPECT_TRUE(Contains(r["error"]["message"], "execute.llm_models")) << r.dump();
}

// A loopback Ollama-like server: GET /api/tags answers `body`.
class TagsServer {
 public:
  explicit TagsServer(std::string body) : body_(std::move(body)) {
    server_.Get("/api/tags", [this](const httplib::Request&, httplib::Response& res) {
      ++hits_;
      res.set_content(body_, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    tollgate::testing::WaitUntil([this] { return port_ <= 0 || server_.is_running(); },
                                 std::chrono::seconds(1));
  }
  ~TagsServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int hits() const { return hits_; }

 private:
  std::string body_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> hits_{0};
};

TEST_F(SeedToolsTest, ListLlmModelsReadsAnOllamaEndpointUnderTheSsrfGuard) {
  Json tags = {{"models", Json::array()}};
  for (const auto& n : kSeedModels) tags["models"].push_back({{"name", n}, {"size", 1}});
  TagsServer server(tags.dump());
  policy().llm_models_url = server.url() + "/";
  // Loopback is not global: refused before anything connects...
  Json refused = Call("list_llm_models", Json::object());
  EXPECT_EQ(Code(refused), "E_URL_FORBIDDEN") << refused.dump();
  EXPECT_EQ(server.hits(), 0);
  // ...unless the operator allowed it, as for http_request.
  Cidr lo;
  ASSERT_TRUE(ParseCidr("127.0.0.0/8", &lo));
  policy().allow_cidrs = {lo};
  Json r = Call("list_llm_models", Json::object());
  ExpectSeedGroups(r);
  EXPECT_EQ(r["data"]["source"], "endpoint");
  EXPECT_EQ(server.hits(), 1);
}

TEST_F(SeedToolsTest, ListLlmModelsRefusesAnAnswerOverItsSizeBound) {
  TagsServer server("{\"models\":[\"" + std::string(2 << 20, 'x') + "\"]}");
  policy().llm_models_url = server.url();
  Cidr lo;
  ASSERT_TRUE(ParseCidr("127.0.0.1", &lo));
  policy().allow_cidrs = {lo};
  Json r = Call("list_llm_models", Json::object());
  EXPECT_EQ(Code(r), "E_TOO_LARGE") << r.dump().substr(0, 300);
}

// ---- search_directory ------------------------------------------------------

TEST_F(SeedToolsTest, SearchDirectoryFindsTheSeedsExampleExactNamesFirst) {
  for (const char* d : {"backend/tests", "frontend/tests", "backend/app/tests_old", "docs"}) Mkdir(d);
  Put("backend/tests.txt", "a file is not a directory");
  Json r = Call("search_directory", {{"name", "tests"}, {"base", workspace()}, {"max_depth", 2}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["query"], "tests");
  EXPECT_EQ(r["data"]["base"], workspace());
  EXPECT_EQ(r["data"]["matches"], (Json{"backend/tests", "frontend/tests"})) << "tests_old is 3 levels down";
  EXPECT_EQ(r["data"]["count"], 2);
  // Default base and depth (3): the partial match too, after the exact ones.
  r = Call("search_directory", {{"name", "TESTS"}});
  EXPECT_EQ(r["data"]["matches"], (Json{"backend/tests", "frontend/tests", "backend/app/tests_old"}))
      << r.dump();
  // A base inside the workspace: matches are still workspace paths.
  r = Call("search_directory", {{"name", "tests"}, {"base", "backend"}});
  EXPECT_EQ(r["data"]["matches"], (Json{"backend/tests", "backend/app/tests_old"})) << r.dump();
}

TEST_F(SeedToolsTest, SearchDirectoryRefusesABaseOutsideTheWorkspace) {
  Mkdir("inside");
  std::filesystem::create_directories(dir().sub("outside/tests"));
  std::filesystem::create_symlink(dir().sub("outside"), workspace() + "/escape");
  for (const std::string& base : {std::string("/etc"), std::string("../"), std::string("escape"),
                                  dir().sub("outside"), workspace() + "/../a2", workspace() + "/escape"}) {
    Json r = Call("search_directory", {{"name", "tests"}, {"base", base}});
    EXPECT_EQ(Code(r), "E_PATH_FORBIDDEN") << base << ": " << r.dump();
  }
  // The walk never follows the symlink either.
  Json r = Call("search_directory", {{"name", "tests"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["count"], 0) << r.dump();
  // An operator's allowed base is searchable, and its matches are absolute.
  policy().search_allowed_bases = {dir().sub("outside")};
  r = Call("search_directory", {{"name", "tests"}, {"base", dir().sub("outside")}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["matches"], (Json{dir().sub("outside/tests")}));
  EXPECT_EQ(
      Code(Call("search_directory", {{"name", "tests"}, {"base", dir().sub("outside") + "/../workspaces"}})),
      "E_PATH_FORBIDDEN");
}

TEST_F(SeedToolsTest, SearchDirectoryCapsDepthAtThreeAndResultsAtFive) {
  Mkdir("a/b/c/deep_target");  // 4 levels down
  for (int i = 0; i < 8; ++i) Mkdir("many/target" + std::to_string(i));
  Json r = Call("search_directory", {{"name", "deep_target"}, {"max_depth", 10}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["count"], 0) << "max_depth is capped at 3";
  EXPECT_EQ(r["data"]["max_depth"], 3);
  r = Call("search_directory", {{"name", "target"}});
  EXPECT_EQ(r["data"]["count"], 5);
  EXPECT_EQ(r["data"]["matches"].size(), 5u);
  EXPECT_EQ(r["data"]["truncated"], true);
  EXPECT_EQ(Code(Call("search_directory", {{"name", "a/b"}})), "E_INVALID_ARGS");
}

// ---- git_status, git_diff --------------------------------------------------

TEST_F(SeedToolsTest, GitStatusShowsTheWorkspacesStatusFromTheSandbox) {
  Repo();
  Put("app.py", "print('changed')\n");
  Json r = Call("git_status", Json::object());
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_TRUE(Contains(r["data"]["stdout"], "On branch main")) << r.dump();
  EXPECT_TRUE(Contains(r["data"]["stdout"], "modified:   app.py")) << r.dump();
  EXPECT_EQ(r["data"]["returncode"], 0);
  EXPECT_EQ(r["data"]["exit_code"], 0);
  EXPECT_TRUE(Contains(r["meta"]["command"], "git ")) << r.dump();
  EXPECT_TRUE(Contains(r["meta"]["command"], " status")) << r.dump();
  EXPECT_EQ(r["meta"]["sandbox"], true);
}

TEST_F(SeedToolsTest, GitDiffShowsUnstagedOrStagedChanges) {
  Repo();
  Put("app.py", "print('staged')\n");
  Git("add app.py");
  Put("app.py", "print('unstaged')\n");
  Json staged = Call("git_diff", {{"staged", true}});
  ASSERT_TRUE(staged["success"]) << staged.dump();
  EXPECT_TRUE(Contains(staged["data"]["stdout"], "diff --git a/app.py")) << staged.dump();
  EXPECT_TRUE(Contains(staged["data"]["stdout"], "+print('staged')"));
  EXPECT_TRUE(Contains(staged["meta"]["command"], "--staged"));
  Json unstaged = Call("git_diff", Json::object());
  EXPECT_TRUE(Contains(unstaged["data"]["stdout"], "+print('unstaged')")) << unstaged.dump();
  EXPECT_FALSE(Contains(unstaged["data"]["stdout"], "+print('staged')"));
}

TEST_F(SeedToolsTest, GitToolsOutsideARepositoryAreAClearError) {
  Put("app.py", "x = 1\n");
  Json r = Call("git_status", Json::object());
  EXPECT_EQ(Code(r), "E_PROJECT_NOT_FOUND") << r.dump();
}

// ---- run_tests, run_lint, run_format, run_build, run_typecheck --------------

TEST_F(SeedToolsTest, RunTestsRunsPytestForTheBackend) {
  Put("backend/pyproject.toml", "[project]\nname = \"app\"\n");
  Put("backend/tests/test_ok.py", "def test_ok():\n    assert 1 + 1 == 2\n");
  Json r = Call("run_tests", {{"target", "backend"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_TRUE(Contains(r["data"]["stdout"], "test session starts")) << r.dump();
  EXPECT_TRUE(Contains(r["data"]["stdout"], "1 passed")) << r.dump();
  EXPECT_EQ(r["data"]["returncode"], 0);
  EXPECT_EQ(r["data"]["target"], "backend");
  EXPECT_EQ(r["data"]["project"], "python");
  EXPECT_EQ(r["data"]["path"], "backend");
  EXPECT_TRUE(Contains(r["meta"]["command"], "pytest")) << r.dump();
  EXPECT_EQ(r["meta"]["sandbox"], true);
}

TEST_F(SeedToolsTest, RunTestsWithAFailingTestIsAFailureWithItsOutput) {
  Put("requirements.txt", "");  // a project at the workspace root
  Put("tests/test_bad.py", "def test_bad():\n    assert 1 == 2\n");
  Json r = Call("run_tests", {{"target", "backend"}});
  EXPECT_FALSE(r["success"]) << r.dump();
  EXPECT_EQ(Code(r), "E_TOOL_EXEC");
  EXPECT_TRUE(Contains(r["data"]["stdout"], "1 failed")) << r.dump();
  EXPECT_EQ(r["data"]["returncode"], 1);
  EXPECT_EQ(r["data"]["path"], ".");
}

TEST_F(SeedToolsTest, RunTestsRunsNpmTestForTheFrontendAndBothForAll) {
  Put("backend/setup.py", "");
  Put("backend/test_ok.py", "def test_ok():\n    pass\n");
  Put("frontend/package.json", R"({"name":"web","version":"1.0.0","scripts":{"test":"node test.js"}})");
  Put("frontend/test.js", "console.log('frontend tests ok');\n");
  Json r = Call("run_tests", {{"target", "frontend"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_TRUE(Contains(r["data"]["stdout"], "frontend tests ok")) << r.dump();
  EXPECT_EQ(r["data"]["project"], "node");
  EXPECT_EQ(r["meta"]["command"], "npm --prefix frontend test");
  Json all = Call("run_tests", {{"target", "all"}});
  ASSERT_TRUE(all["success"]) << all.dump();
  EXPECT_EQ(all["data"]["success"], true);
  EXPECT_EQ(all["data"]["parts"]["backend"]["returncode"], 0) << all.dump();
  EXPECT_EQ(all["data"]["parts"]["frontend"]["returncode"], 0);
  EXPECT_TRUE(Contains(all["data"]["stdout"], "1 passed")) << all.dump();
  EXPECT_TRUE(Contains(all["data"]["stdout"], "frontend tests ok"));
  // One part failing fails the whole, naming it.
  Put("frontend/test.js", "process.exit(3);\n");
  all = Call("run_tests", {{"target", "all"}});
  EXPECT_FALSE(all["success"]);
  EXPECT_EQ(all["data"]["success"], false);
  EXPECT_EQ(all["data"]["parts"]["backend"]["success"], true);
  EXPECT_EQ(all["data"]["parts"]["frontend"]["returncode"], 3) << all.dump();
  EXPECT_TRUE(Contains(all["error"]["message"], "frontend")) << all.dump();
}

TEST_F(SeedToolsTest, ATargetWithoutItsProjectOrProgramIsAClearError) {
  EXPECT_EQ(Code(Call("run_tests", {{"target", "backend"}})), "E_PROJECT_NOT_FOUND");
  EXPECT_EQ(Code(Call("run_tests", {{"target", "all"}})), "E_PROJECT_NOT_FOUND");
  EXPECT_EQ(Code(Call("run_tests", {{"target", "mobile"}})), "E_INVALID_ARGS");
  Put("frontend/package.json", R"({"name":"web","scripts":{}})");
  Json r = Call("run_lint", {{"target", "frontend"}});
  EXPECT_EQ(Code(r), "E_PROGRAM_NOT_FOUND") << r.dump();
  EXPECT_TRUE(Contains(r["error"]["message"], "\"lint\" script")) << r.dump();
  r = Call("run_typecheck", {{"target", "frontend"}});
  EXPECT_EQ(Code(r), "E_PROGRAM_NOT_FOUND") << r.dump();
  EXPECT_TRUE(Contains(r["error"]["message"], "tsc")) << r.dump();
  // A node_modules/.bin/tsc that leads out of the workspace is not the project's.
  Mkdir("frontend/node_modules/.bin");
  std::filesystem::create_symlink("/usr/bin/true", workspace() + "/frontend/node_modules/.bin/tsc");
  EXPECT_EQ(Code(Call("run_typecheck", {{"target", "frontend"}})), "E_PROGRAM_NOT_FOUND");
}

TEST_F(SeedToolsTest, RunLintRunsRuffForTheBackendOrNamesItWhenMissing) {
  Put("backend/pyproject.toml", "[project]\nname = \"app\"\n");
  Put("backend/app.py", "x = 1\n");
  Json r = Call("run_lint", {{"target", "backend"}});
  if (FindProgram("ruff").empty()) {
    EXPECT_EQ(Code(r), "E_PROGRAM_NOT_FOUND") << r.dump();
    EXPECT_TRUE(Contains(r["error"]["message"], "ruff is not installed")) << r.dump();
  } else {
    ASSERT_TRUE(r["success"]) << r.dump();
    EXPECT_TRUE(Contains(r["data"]["stdout"], "All checks passed!")) << r.dump();
  }
  // The frontend's own lint script.
  Put("frontend/package.json", R"({"name":"web","scripts":{"lint":"node lint.js"}})");
  Put("frontend/lint.js", "console.log('no lint issues');\n");
  r = Call("run_lint", {{"target", "frontend"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_TRUE(Contains(r["data"]["stdout"], "no lint issues"));
}

TEST_F(SeedToolsTest, RunFormatChecksWithBlackAndAppliesOnlyWhenAsked) {
  ASSERT_FALSE(FindProgram("black").empty()) << "scripts/setup.sh installs black";
  Put("backend/pyproject.toml", "[project]\nname = \"app\"\n");
  Put("backend/app.py", "x=1\n");
  chown((workspace() + "/backend/app.py").c_str(), 65534, 65534);  // writable by nobody
  Json r = Call("run_format", {{"target", "backend"}, {"check_only", true}});
  EXPECT_EQ(Code(r), "E_TOOL_EXEC") << r.dump();
  EXPECT_TRUE(Contains(r["data"]["stderr"], "would reformat")) << r.dump();
  EXPECT_TRUE(Contains(r["meta"]["command"], "black --check backend"));
  std::ifstream in(workspace() + "/backend/app.py");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "x=1\n") << "a check changes nothing";
  Put("backend/app.py", "x = 1\n");
  r = Call("run_format", {{"target", "backend"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_TRUE(Contains(r["data"]["stderr"], "would be left unchanged")) << r.dump();
}

TEST_F(SeedToolsTest, RunBuildByteCompilesTheBackendAndRunsTheFrontendsBuildScript) {
  Put("backend/requirements.txt", "");
  Put("backend/app.py", "def f():\n    return 1\n");
  Json r = Call("run_build", {{"target", "backend"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_TRUE(Contains(r["meta"]["command"], "python3 -m compileall"));
  EXPECT_FALSE(std::filesystem::exists(workspace() + "/backend/__pycache__"))
      << "the bytecode stays in the sandbox";
  Put("backend/broken.py", "def f(:\n");
  r = Call("run_build", {{"target", "backend"}});
  EXPECT_EQ(Code(r), "E_TOOL_EXEC") << r.dump();
  EXPECT_TRUE(Contains(r["data"]["stdout"], "broken.py")) << r.dump();
  Put("frontend/package.json", R"({"name":"web","scripts":{"build":"node build.js"}})");
  Put("frontend/build.js", "console.log('vite v5.0.0 building for production...');\n");
  r = Call("run_build", {{"target", "frontend"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_TRUE(Contains(r["data"]["stdout"], "building for production")) << r.dump();
}

TEST_F(SeedToolsTest, RunTypecheckRunsMypyForTheBackend) {
  ASSERT_FALSE(FindProgram("mypy").empty()) << "scripts/setup.sh installs mypy";
  Put("backend/pyproject.toml", "[project]\nname = \"app\"\n");
  Put("backend/app.py", "def f(x: int) -> int:\n    return x\n");
  Json r = Call("run_typecheck", {{"target", "backend"}});
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_TRUE(Contains(r["data"]["stdout"], "Success: no issues found")) << r.dump();
  Put("backend/bad.py", "def g() -> int:\n    return 'x'\n");
  r = Call("run_typecheck", {{"target", "backend"}});
  EXPECT_EQ(Code(r), "E_TOOL_EXEC") << r.dump();
  EXPECT_TRUE(Contains(r["data"]["stdout"], "Incompatible return value")) << r.dump();
  EXPECT_EQ(Code(Call("run_typecheck", {{"target", "all"}})), "E_INVALID_ARGS");
}

// ---- configuration ---------------------------------------------------------

TEST(SeedToolsConfig, TheExecuteSectionReadsTheNewSettingsAndRefusesBadOnes) {
  ExecutePolicy p;
  Json ok =
      Json::parse(R"({"execute":{"llm_models":["llama3:8b"],"llm_models_url":"http://models.example:11434",
      "llm_models_timeout_ms":2000,"search_allowed_bases":["/srv/repos/"],"qa_limits":{"timeout_ms":5000}}})");
  ASSERT_TRUE(ExecutePolicyFromJson(ok, "/tmp/d", &p).ok());
  EXPECT_EQ(p.llm_models, std::vector<std::string>{"llama3:8b"});
  EXPECT_EQ(p.llm_models_url, "http://models.example:11434");
  EXPECT_EQ(p.llm_models_timeout_ms, 2000);
  EXPECT_EQ(p.search_allowed_bases, std::vector<std::string>{"/srv/repos"});
  EXPECT_EQ(p.qa_limits.timeout_ms, 5000);
  EXPECT_EQ(p.qa_limits.memory_mb, 0u) << "the other limits keep their defaults";
  for (const char* bad :
       {R"({"llm_models_url":"ftp://x/"})", R"({"llm_models_url":42})", R"({"llm_models":[""]})",
        R"({"search_allowed_bases":["relative/dir"]})", R"({"qa_limits":{"timeout_ms":0}})"}) {
    EXPECT_EQ(ExecutePolicyFromJson(Json{{"execute", Json::parse(bad)}}, "/tmp/d", &p).code(),
              "E_INVALID_ARGS")
        << bad;
  }
}

// ---- through the pipeline --------------------------------------------------

class SeedToolsPipelineTest : public testing::PolicyPipelineTest {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);  // the sandbox's user reads below it when root
    StartWith("version: 1\nmode: ask\napproval_threshold: HIGH\n");
  }
  std::string Workspace() const { return dir_.sub("data") + "/workspaces/org-1/agent-1"; }
};

TEST_F(SeedToolsPipelineTest, GetDatetimeAndGitStatusCompleteWithTheSeedsFields) {
  Json r = Call("dt-1", "get_datetime", Json::object());
  ASSERT_EQ(r["status"], "completed") << r.dump();
  const Json& d = r["result"]["data"];
  for (const char* k : {"datetime", "date", "time", "timestamp"})
    EXPECT_TRUE(d.contains(k)) << k << ": " << r.dump();
  EXPECT_EQ(d["date"].get<std::string>(), d["datetime"].get<std::string>().substr(0, 10));

  std::filesystem::create_directories(Workspace());
  chmod(dir_.sub("data").c_str(), 0755);
  std::ofstream(Workspace() + "/app.py") << "print('hi')\n";
  ASSERT_EQ(RunCommand("cd '" + Workspace() +
                       "' && GIT_CONFIG_GLOBAL=/dev/null git init -q -b main && "
                       "GIT_CONFIG_GLOBAL=/dev/null git -c user.name=t -c user.email=t@example.com commit -q "
                       "--allow-empty -m first")
                .exit_code,
            0);
  Json g = Call("gs-1", "git_status", Json::object());
  ASSERT_EQ(g["status"], "completed") << g.dump();
  EXPECT_TRUE(Contains(g["result"]["data"]["stdout"], "On branch main")) << g.dump();
  EXPECT_TRUE(Contains(g["result"]["data"]["stdout"], "app.py")) << "untracked: " << g.dump();
  EXPECT_EQ(g["result"]["meta"]["sandbox"], true);
  // run_tests is HIGH: under this policy it waits for an approver rather than runs.
  Send(Request("rt-1", "run_tests", {{"target", "backend"}}));
  bool pending = false;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !pending && std::chrono::steady_clock::now() < end;) {
    std::vector<Message> batch;
    results_->Poll(100, std::chrono::milliseconds(100), &batch);
    for (const Json& p : results_->pending()) pending = pending || p.value("request_id", "") == "rt-1";
  }
  EXPECT_TRUE(pending) << "run_tests asks";
}

}  // namespace
}  // namespace tollgate
