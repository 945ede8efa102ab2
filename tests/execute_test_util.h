// Helpers for the execute suites: a policy rooted in a scratch dir, a
// ToolContext for one agent, and running a tool by name.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <thread>

#include "execute/registry.h"
#include "tests/child_process.h"
#include "tests/test_util.h"

namespace tollgate::testing {

// Survivors(tag) once it reaches 0, or after 10 s: a killed process takes a
// moment to leave /proc (longer on a loaded machine), a surviving one never
// does.
inline int SurvivorsAfterTeardown(const std::string& tag) {
  WaitUntil([&] { return Survivors(tag) == 0; }, std::chrono::seconds(10));
  return Survivors(tag);
}

class ToolFixture {
 public:
  ToolFixture() {
    chmod(dir_.path().c_str(), 0755);  // children run as nobody when root
    policy_ = DefaultExecutePolicy(dir_.path());
    registry_.RegisterBuiltins();
  }
  ExecutePolicy& policy() { return policy_; }
  const TempDir& dir() const { return dir_; }
  std::string workspace(const std::string& org = "o1", const std::string& agent = "a1") const {
    return dir_.path() + "/workspaces/" + org + "/" + agent;
  }
  ToolContext Ctx(const std::string& org = "o1", const std::string& agent = "a1") {
    ToolContext c;
    c.org_id = org;
    c.agent_id = agent;
    c.session_id = "s1";
    c.request_id = "r1";
    c.now_us = 1'790'000'000'000'000;
    c.policy = &policy_;
    c.decision = Json{{"verdict", "allow"}};
    c.audit = audit_;
    return c;
  }
  Json Call(const std::string& tool, const Json& args, const std::string& org = "o1",
            const std::string& agent = "a1") {
    auto t = registry_.Find(tool);
    if (!t) return Json{{"success", false}, {"error", {{"code", "NO_SUCH_TOOL"}}}};
    return t->Run(args, Ctx(org, agent));
  }
  static std::string Code(const Json& r) {
    return r.contains("error") && r["error"].is_object() ? r["error"].value("code", "") : "";
  }
  // Copies the test's exec_helper (at `src`) into the scratch dir and
  // allowlists it; its path. A copy: the sandbox binds the program's own
  // file, and the build tree may not be reachable for the sandbox's user.
  std::string AllowExecHelper(const std::string& src) {
    const std::string helper = dir_.sub("exec_helper");
    std::filesystem::copy_file(src, helper);
    std::filesystem::permissions(helper, std::filesystem::perms(0755));
    policy_.command_allowlist.push_back(helper);
    return helper;
  }
  // A tag no other process's command line holds (see Survivors).
  static std::string UniqueTag() {
    std::random_device rd;
    return "tg" + std::to_string(rd()) + std::to_string(rd());
  }
  void Write(const std::string& path, const std::string& content) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << content;
  }
  AuditReader* audit_ = nullptr;
  ToolRegistry registry_;

 private:
  TempDir dir_;
  ExecutePolicy policy_;
};

}  // namespace tollgate::testing
