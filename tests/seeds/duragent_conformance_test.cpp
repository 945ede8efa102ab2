// The Duragent seed's conformance suite (tests/seeds/003_duragent.json,
// docs/seeds.md) through the real pipeline, on a Duragent directory laid out
// as the seed writes it: the seed's example policy as .duragent/policy.yaml
// and its agent.yaml as agents/coder/agent.yaml, verbatim (the only change:
// the Slack URL points at a loopback receiver, since tests never leave
// loopback). The gate's own settings the example cannot hold (the org, where
// the search API and the model are, which programs bash may run) are
// appended to the workspace file (003_duragent_tollgate.yaml; docs/policy.md,
// "Duragent policy files"). The seed's ask mode asks a human about every
// call its allow list does not name: the suite answers as its examples say
// (`approve`), as an approver would.
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "tests/approve_util.h"
#include "tests/child_process.h"
#include "tests/http_pipeline_fixture.h"
#include "tests/pipeline_fixture.h"
#include "tests/seeds/seed_suite.h"

namespace tollgate {
namespace {

namespace fs = std::filesystem;
using testing::RecordingServer;
using testing::SeedSuite;

constexpr const char* kOrg = "org-1";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at; (at = s.find(from)) != std::string::npos;) s.replace(at, from.size(), to);
  return s;
}

// {{saved:NAME}} in `args` replaced by what an earlier example saved.
Json WithSaved(const Json& args, const std::map<std::string, Json>& saved) {
  if (args.is_string()) {
    const std::string s = args;
    if (s.rfind("{{saved:", 0) == 0 && s.size() > 10) {
      auto it = saved.find(s.substr(8, s.size() - 10));
      return it == saved.end() ? Json(s) : it->second;
    }
    return args;
  }
  if (args.is_object() || args.is_array()) {
    Json out = args;
    for (auto it = out.begin(); it != out.end(); ++it) *it = WithSaved(*it, saved);
    return out;
  }
  return args;
}

Json At(const Json& j, const std::string& dotted) {
  const Json* cur = &j;
  size_t from = 0;
  while (from <= dotted.size()) {
    const size_t dot = dotted.find('.', from);
    const std::string part = dotted.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (!cur->is_object() || !cur->contains(part)) return Json();
    cur = &(*cur)[part];
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  return *cur;
}

class DuragentConformance : public testing::PolicyPipelineTest {
 protected:
  void SetUp() override {
    server_.handler = [this](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/hook") {
        std::lock_guard<std::mutex> lock(mu_);
        hooks_.push_back(Json::parse(req.body, nullptr, false));
        return res.set_content("ok", "text/plain");
      }
      if (req.path == "/page") {
        return res.set_content(
            "<html><head><title>T</title></head><body><h1>Gate</h1><p>Every <b>call</b> "
            "<a href=\"/x\">decided</a>.</p></body></html>",
            "text/html");
      }
      if (req.path == "/long") {
        std::string body = "<html><body>";
        for (int i = 0; i < 3000; ++i) body += "<p>paragraph " + std::to_string(i) + " of a long page</p>";
        return res.set_content(body + "</body></html>", "text/html");
      }
      if (req.path == "/res/v1/web/search") {
        return res.set_content(R"({"web":{"results":[{"title":"tollgate","url":"https://example.com/t",)"
                               R"("description":"a gate"}]}})",
                               "application/json");
      }
      if (req.path == "/v1/chat/completions") {
        return res.set_content(
            R"({"choices":[{"message":{"role":"assistant","content":"The build uses cmake."}}]})",
            "application/json");
      }
      res.status = 404;
    };
    root_ = dir_.sub("duragent");
    const std::string src = TOLLGATE_SOURCE_DIR "/tests/seeds/";
    // The seed's two documents, verbatim but for the webhook's address.
    WriteFile(root_ + "/.duragent/policy.yaml",
              Replace(ReadText(src + "003_duragent_policy.yaml"), "https://hooks.slack.com/services/...",
                      server_.origin() + "/hook") +
                  Replace(ReadText(src + "003_duragent_tollgate.yaml"), "{{server}}", server_.origin()));
    setenv("DURAGENT_TEST_BRAVE_KEY", "test-brave-key", 1);
    WriteFile(root_ + "/agents/coder/agent.yaml", ReadText(src + "003_duragent_agent.yaml"));
    // What that agent.yaml names, and a workspace tool of the seed's layout.
    WriteFile(root_ + "/agents/coder/tools/code-search.sh",
              "#!/bin/sh\necho '{\"tool\": \"declared code-search\"}'\n", 0755);
    WriteFile(root_ + "/agents/coder/tools/code-search/README.md",
              "# code-search\n\nSearch codebase for patterns.\n");
    // A second agent declaring every built-in (the seed's snippets, and
    // memory configured) and a CLI tool, with one tool of each discovery
    // directory: its own (run.sh) and the workspace's (run).
    WriteFile(root_ + "/agents/runtime/agent.yaml",
              "spec:\n  tools:\n"
              "    - type: builtin\n      name: bash\n"
              "    - type: builtin\n      name: reload_tools\n"
              "    - type: builtin\n      name: web\n"
              "    - type: builtin\n      name: schedule\n"
              "    - type: builtin\n      name: background_process\n"
              "    - type: builtin\n      name: session\n"
              "    - type: cli\n      name: report\n      command: ./tools/report.sh\n"
              "      description: Write the weekly report\n"
              "  memory:\n    enabled: true\n");
    WriteFile(root_ + "/agents/runtime/tools/report.sh", "#!/bin/sh\necho '{}'\n", 0755);
    WriteFile(root_ + "/agents/runtime/tools/lint/run.sh", "#!/bin/sh\necho '{}'\n", 0755);
    WriteFile(root_ + "/.duragent/tools/fmt/run", "#!/bin/sh\necho '{}'\n", 0755);
    WriteFile(root_ + "/.duragent/tools/fmt/README.md", "Format the code.\n");
    StartDir(root_);
    workspace_root_ = dir_.sub("data") + "/workspaces/" + kOrg;
  }

  void StartDir(const std::string& dir) {
    PipelineOptions o;
    o.data_dir = dir_.sub("data");
    o.durability = Durability::kBuffered;
    o.policy_path = dir;
    ASSERT_TRUE(Pipeline::Start(o, &p_).ok());
    signers_ = std::make_unique<testing::TestSigners>(*p_);
    bus_.brokers = p_->bootstrap();
    ASSERT_TRUE(Producer::Open(bus_, "", &producer_).ok());
    ASSERT_TRUE(
        testing::ResultsReader::Open(bus_, p_->gate().public_b64url(), "test-results", &results_).ok());
  }

  void Prepare(const Json& ex, const std::string& agent) {
    const std::string ws = workspace_root_ + "/" + agent;
    fs::create_directories(ws);
    if (ex.value("git", false) && !fs::exists(ws + "/.git")) {
      std::ofstream(ws + "/README.md") << "seed\n";
      // The sandbox runs as the workspace's own uid, HOME the workspace: git
      // must be told the test's repository is safe, as an agent would.
      std::ofstream(ws + "/.gitconfig") << "[safe]\n\tdirectory = *\n";
      const std::string git =
          "cd '" + ws + "' && git -c safe.directory='*' -c user.name=t -c user.email=t@t ";
      ASSERT_EQ(std::system((git + "init -q && " + git + "add -A && " + git + "commit -qm init").c_str()), 0);
    }
    if (ex.value("reload_first", false)) {
      WriteFile(ws + "/tools/my-new-tool/run.py",
                "import json\nprint(json.dumps({'made_by': 'the agent'}))\n");
      ASSERT_EQ(Run(agent, "reload-" + ex["tool"].get<std::string>().substr(4), "reload_tools",
                    Json::object(), true)
                    .value("status", ""),
                "completed");
    }
  }

  // One call of `agent`, answering its approval as `approve` says (null: none
  // expected). The final result, or null after 30 s.
  Json Run(const std::string& agent, const std::string& rid, const std::string& tool, const Json& args,
           const Json& approve) {
    const Json req{{"request_id", rid},      {"org_id", kOrg}, {"agent_id", agent},
                   {"session_id", "sess-1"}, {"tool", tool},   {"args", args}};
    Send(req);
    bool answered = false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::vector<Message> batch;
      results_->Poll(100, std::chrono::milliseconds(100), &batch);
      for (auto& m : batch) {
        if (m.headers[kHeaderRequestId] == rid) return Json::parse(m.value);
      }
      // The gate's signed `pending` message: the call awaits an approver.
      bool pending = false;
      for (const Json& p : results_->pending())
        pending = pending || (p.is_object() && p["request_id"] == rid);
      if (pending && !answered && !approve.is_null()) {
        answered = true;
        const bool yes = approve != Json(false);
        Json resp = testing::Response(rid, yes ? "approve" : "deny", "alice", ArgsHash(args),
                                      approve == Json("always") ? "always" : "once");
        Message out =
            MessageFor(bus_.topics.approval_responses(), {{"request_id", rid}, {"agent_id", agent}}, resp);
        signers_->SignResponse(&out, kOrg, "alice");
        EXPECT_TRUE(producer_->Send(out).ok());
        EXPECT_TRUE(producer_->Flush(std::chrono::seconds(10)).ok());
      }
    }
    ADD_FAILURE() << "no result for " << rid;
    return Json();
  }

  std::string root_, workspace_root_;
  std::mutex mu_;
  std::vector<Json> hooks_;  // what the webhook receiver got
  RecordingServer server_;
};

TEST_F(DuragentConformance, TheSeedsPolicyAndAgentYamlServeEveryToolAndActionThroughThePipeline) {
  const SeedSuite suite = SeedSuite::Load(TOLLGATE_SOURCE_DIR "/tests/seeds/003_duragent.json");
  std::set<std::string> served;
  std::map<std::string, Json> saved;
  int n = 0;
  for (const Json& ex : suite.doc["examples"]) {
    SCOPED_TRACE(ex["name"].get<std::string>());
    std::cout << "example: " << ex["name"].get<std::string>() << std::endl;
    const std::string agent = ex.value("agent", "coder");
    Prepare(ex, agent);
    const Json args = WithSaved(testing::Substitute(ex["args"], server_.origin(), ""), saved);
    const std::string rid = "003-" + std::to_string(++n);
    Json r = Run(agent, rid, ex["tool"], args, ex.value("approve", Json()));
    // A background process's output arrives when it arrives: read it again until it shows.
    if (ex.contains("wait_for")) {
      int i = 0;
      testing::WaitUntil(
          [&] {
            if (r.dump().find(ex["wait_for"].get<std::string>()) != std::string::npos) return true;
            r = Run(agent, rid + "-" + std::to_string(i++), ex["tool"], args, ex.value("approve", Json()));
            return false;
          },
          std::chrono::seconds(15));
    }
    if (!r.is_object()) r = Json::object();
    const std::string danger =
        r.contains("decision") && r["decision"].is_object() ? r["decision"].value("danger_level", "") : "";
    std::string why = SeedSuite::Check(ex, r.value("result", Json()), Json::object(), danger);
    if (why.empty() && ex.value("notify", false)) {
      // The webhook fires after the call ran: wait for it.
      const bool hooked = testing::WaitUntil(
          [&] {
            std::lock_guard<std::mutex> lock(mu_);
            for (const Json& h : hooks_) {
              if (h.dump().find(rid) != std::string::npos) return true;
            }
            return false;
          },
          std::chrono::seconds(10));
      if (!hooked) why = "no webhook delivery names " + rid;
    }
    EXPECT_EQ(why, "") << ex["name"] << ": " << r.dump();
    if (why.empty()) {
      const auto c = suite.Covers(ex);
      served.insert(c.begin(), c.end());
    }
    const Json save = ex.value("save", Json::object());  // items() must not outlive it
    for (const auto& [name, path] : save.items()) {
      saved[name] = At(r.value("result", Json()), path.get<std::string>());
    }
  }
  std::cout << suite.Coverage(served) << "\n";
}

}  // namespace
}  // namespace tollgate
