// The seeds' documented examples through the real pipeline on Kafka: each
// is a request signed by its agent on tollgate.requests, decided, run and
// answered on the org's results topic, and the seed's documented fields and
// codes must come back (tests/seeds/seed_suite.h; the same examples go
// through MCP in seeds.test.mjs). Each suite prints its coverage, which
// docs/seeds.md states.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "tests/http_pipeline_fixture.h"
#include "tests/pipeline_fixture.h"
#include "tests/seeds/seed_suite.h"

namespace tollgate {
namespace {

namespace fs = std::filesystem;
using testing::RecordingServer;
using testing::SeedSuite;

// fetch_url's page and extract_links' links (relative, absolute, repeated).
constexpr const char* kPage =
    R"(<html><body><a href="/page1">1</a> <a href='https://example.com/x'>x</a> <a href="/page1">again</a></body></html>)";

// A loopback port nothing listens on (bound, then closed).
int ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

class SeedConformance : public testing::PolicyPipelineTest {
 protected:
  void SetUp() override {
    server_.handler = [this](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/slow") std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      {
        std::lock_guard<std::mutex> lock(mu_);
        Json headers = Json::object();
        for (const auto& [k, v] : req.headers) {
          std::string lower = k;
          for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          headers[lower] = v;
        }
        const auto q = req.target.find('?');
        got_ = {{"json", req.body.empty() ? Json() : Json::parse(req.body, nullptr, false)},
                {"headers", headers},
                {"query", q == std::string::npos ? "" : req.target.substr(q + 1)}};
      }
      if (req.path == "/big") return res.set_content(std::string(50000, 'x'), "text/plain");
      if (req.path == "/page" || req.path == "/links.html") return res.set_content(kPage, "text/html");
      res.set_content(R"({"items":[1,2,3]})", "application/json");
    };
    // The policy names the loopback server ({{server}}: base_url).
    std::ifstream in(TOLLGATE_SOURCE_DIR "/tests/seeds/conformance_policy.yaml");
    std::string policy(std::istreambuf_iterator<char>(in), {});
    StartWith(testing::Substitute(Json(policy), server_.origin(), "").get<std::string>());
    workspace_ = dir_.sub("data") + "/workspaces/org-1/agent-1";
  }

  // A fresh workspace holding the example's files (and a git repository
  // with one staged change when it asks for one).
  void Prepare(const Json& ex) {
    fs::create_directories(workspace_);
    for (const auto& entry : fs::directory_iterator(workspace_)) fs::remove_all(entry.path());
    const Json files = ex.value("files", Json::object());
    for (const auto& [path, content] : files.items()) {
      fs::create_directories(fs::path(workspace_ + "/" + path).parent_path());
      std::ofstream(workspace_ + "/" + path) << content.get<std::string>();
    }
    if (ex.value("git", false)) {
      std::ofstream(workspace_ + "/README.md") << "seed\n";
      // The workspace belongs to the agent's sandbox uid: git must be told it is safe.
      const std::string git =
          "cd '" + workspace_ + "' && git -c safe.directory='*' -c user.name=t -c user.email=t@t ";
      ASSERT_EQ(std::system((git + "init -q && " + git + "add -A && " + git + "commit -qm init").c_str()), 0);
      std::ofstream(workspace_ + "/README.md", std::ios::app) << "staged\n";
      ASSERT_EQ(std::system((git + "add README.md").c_str()), 0);
    }
  }

  void RunSuite(const std::string& file) {
    const SeedSuite suite = SeedSuite::Load(TOLLGATE_SOURCE_DIR "/tests/seeds/" + file);
    const std::string closed = "http://127.0.0.1:" + std::to_string(ClosedPort());
    std::set<std::string> served;
    int n = 0;
    for (const Json& ex : suite.doc["examples"]) {
      SCOPED_TRACE(ex["name"].get<std::string>());
      Prepare(ex);
      {
        std::lock_guard<std::mutex> lock(mu_);
        got_ = Json::object();
      }
      const Json args = testing::Substitute(ex["args"], server_.origin(), closed);
      const Json r = Call(suite.file.substr(0, 3) + "-" + std::to_string(++n), ex["tool"], args);
      Json got;
      {
        std::lock_guard<std::mutex> lock(mu_);
        got = got_;
      }
      const std::string danger =
          r.contains("decision") && r["decision"].is_object() ? r["decision"].value("danger_level", "") : "";
      const std::string why = SeedSuite::Check(ex, r.value("result", Json()), got, danger);
      EXPECT_EQ(why, "") << ex["name"] << ": " << r.dump();
      if (why.empty()) {
        const auto c = suite.Covers(ex);
        served.insert(c.begin(), c.end());
      }
    }
    std::cout << suite.Coverage(served) << "\n";
  }

  std::mutex mu_;
  Json got_ = Json::object();  // what the server received last
  std::string workspace_;
  // Last, so it is destroyed first: its handler (a /slow request may still
  // be in it) uses mu_ and got_.
  RecordingServer server_;
};

// Every suite in tests/seeds, on one pipeline (starting one is most of the cost).
TEST_F(SeedConformance, EachSeedsDocumentedExamplesComeBackWithItsFieldsAndCodes) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(TOLLGATE_SOURCE_DIR "/tests/seeds")) {
    // A suite with its own runner (Duragent's: duragent_conformance_test) is not run here.
    if (e.path().extension() == ".json" && !SeedSuite::Load(e.path()).doc.contains("runner")) {
      files.push_back(e.path().filename());
    }
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 4u);
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    RunSuite(f);
  }
}

}  // namespace
}  // namespace tollgate
