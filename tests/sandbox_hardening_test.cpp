// The sandbox's second line (docs/sandbox.md): a seccomp filter refuses new
// namespaces, ptrace, the keyring, bpf and the like inside it while ordinary
// programs keep working, and each workspace runs under a uid of its own,
// recorded in a table (UidTable) that never hands one uid out twice, across
// restarts, processes and threads.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "execute/sandbox.h"
#include "execute/uid_table.h"
#include "tests/execute_test_util.h"

namespace tollgate {
namespace {

using testing::TempDir;
using testing::ToolFixture;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// ---- The seccomp filter, seen from inside the real sandbox ----

class SandboxHardeningTest : public ::testing::Test, public ToolFixture {
 protected:
  void SetUp() override {
    // A copy the sandbox's user can reach (the build tree may not be).
    probe_ = dir().sub("seccomp_probe");
    std::filesystem::copy_file(SECCOMP_PROBE, probe_);
    std::filesystem::permissions(probe_, std::filesystem::perms(0755));
    policy().command_allowlist.push_back(probe_);
    policy().limits.timeout_ms = 5000;
    policy().cli_limits.timeout_ms = 5000;
    policy().tools_dir = dir().sub("tools");
  }
  // What the probe reports, call by call ("EPERM", "ok"...).
  std::map<std::string, std::string> Probe() {
    Json r = Call("execute_command", {{"command", probe_}, {"args", Json::array()}});
    EXPECT_TRUE(r["success"]) << r.dump();
    std::map<std::string, std::string> result;
    std::istringstream lines(r.contains("data") ? r["data"].value("stdout", "") : "");
    for (std::string name, value; lines >> name >> value;) result[name] = value;
    return result;
  }
  // Runs `script` as the CLI tool cli:<name>.
  Json Cli(const std::string& name, const std::string& script) {
    const std::string tool = dir().sub("tools") + "/" + name;
    std::filesystem::create_directories(tool);
    std::ofstream(tool + "/run") << script;
    std::filesystem::permissions(tool + "/run", std::filesystem::perms(0755));
    ToolRegistry reg(dir().sub("tools"));
    reg.Reload();
    auto t = reg.Find("cli:" + name);
    if (!t) return Json{{"success", false}, {"error", {{"code", "NO_SUCH_TOOL"}}}};
    return t->Run(Json::object(), Ctx());
  }
  std::string probe_;
};

TEST_F(SandboxHardeningTest, NewNamespacesAreRefusedInsideTheSandboxWithOrWithoutAUserSwitch) {
  for (const std::string run_as : {"nobody", ""}) {
    policy().run_as = run_as;
    auto got = Probe();
    for (const char* call : {"unshare-user", "unshare-mount", "unshare-net", "unshare-time", "clone-user",
                             "clone-pid", "setns"}) {
      EXPECT_EQ(got[call], "EPERM") << call << " as '" << run_as << "'";
    }
    EXPECT_EQ(got["clone3"], "ENOSYS") << "libc falls back to clone, whose flags the filter reads";
    EXPECT_EQ(got["clone-plain"], "ok") << "a clone without namespace flags is a fork";
    EXPECT_EQ(got["unshare-files"], "ok") << "unshare without namespace flags stays allowed";
    EXPECT_EQ(got["fork"], "ok");
  }
  // The util-linux tool, as an agent would try it.
  Json r = Cli("nest",
               "#!/bin/sh\ncat >/dev/null\nerr=$(unshare -U true 2>&1)\n"
               "printf '{\"status\": %d, \"error\": \"%s\"}\\n' $? \"$err\"\n");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_NE(r["data"]["status"], 0) << r.dump();
  EXPECT_NE(r["data"]["error"].get<std::string>().find("Operation not permitted"), std::string::npos)
      << r.dump();
}

TEST_F(SandboxHardeningTest, TracingTheKeyringAndKernelInterfacesAreRefused) {
  auto got = Probe();
  for (const char* call :
       {"ptrace", "process_vm_readv", "keyctl", "add_key", "bpf", "perf_event_open", "userfaultfd",
        "io_uring_setup", "mount", "chroot", "open_by_handle_at", "tiocsti", "vsock"}) {
    EXPECT_EQ(got[call], "EPERM") << call;
  }
}

TEST_F(SandboxHardeningTest, PersonalityCanBeReadButNotWeakened) {
  auto got = Probe();
  EXPECT_EQ(got["personality-no-aslr"], "EPERM");
  EXPECT_EQ(got["personality-high-bit-no-aslr"], "EPERM") << "an extra bit does not slip the flag through";
  EXPECT_EQ(got["personality-query"], "ok");
  EXPECT_EQ(got["personality-linux"], "ok");
}

TEST_F(SandboxHardeningTest, OrdinaryProgramsStillWork) {
  // Threads (clone3 falls back to clone), subprocesses, pipes, git.
  Json r =
      Cli("ordinary",
          "#!/bin/sh\nset -e\ncat >/dev/null\n"
          "ls / >/dev/null\n"
          "n=$(printf 'a\\nb\\n' | cat | wc -l)\n"
          "py=$(/usr/bin/python3 -c 'import subprocess, threading\n"
          "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
          "print(subprocess.run([\"echo\", \"sub\"], capture_output=True, text=True).stdout.strip())')\n"
          "git=skipped\n"
          "if [ -x /usr/bin/git ]; then\n"
          "  git init -q repo && git -C repo -c user.email=a@b -c user.name=a commit -q --allow-empty -m m\n"
          "  git=$(git -C repo rev-list --count HEAD)\n"
          "fi\n"
          "printf '{\"lines\": %d, \"py\": \"%s\", \"git\": \"%s\"}\\n' \"$n\" \"$py\" \"$git\"\n");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(r["data"]["lines"], 2);
  EXPECT_EQ(r["data"]["py"], "sub");
  if (access("/usr/bin/git", X_OK) == 0) {
    EXPECT_EQ(r["data"]["git"], "1") << r.dump();
  }
}

// ---- Sandbox uids: recorded, never shared ----

TEST_F(SandboxHardeningTest, TwoAgentsWhoseOldHashesCollidedRunUnderDifferentUids) {
  if (geteuid() != 0) GTEST_SKIP() << "uids are switched only as root";
  std::map<std::string, std::string> ran;
  for (const auto& [org, agent] : {std::pair<std::string, std::string>{"o1", "victim"}, {"o2", "x405521"}}) {
    Json r = Call("execute_command", {{"command", "id"}, {"args", Json::array({"-u"})}}, org, agent);
    ASSERT_TRUE(r["success"]) << r.dump();
    std::string out = r["data"]["stdout"];
    while (!out.empty() && out.back() == '\n') out.pop_back();
    uid_t recorded = 0;
    ASSERT_TRUE(SandboxUid(workspace(org, agent), &recorded).ok());
    EXPECT_EQ(out, std::to_string(recorded));
    struct stat st {};
    ASSERT_EQ(stat(workspace(org, agent).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, recorded) << "the workspace belongs to its own uid";
    ran[org] = out;
  }
  EXPECT_NE(ran["o1"], ran["o2"]);
}

class UidTableTest : public ::testing::Test {
 protected:
  std::unique_ptr<UidTable> Open(uid_t range = kSandboxUidRange) {
    std::unique_ptr<UidTable> t;
    Status s = UidTable::Open(path_, kSandboxUidBase, range, &t);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return t;
  }
  static uid_t Get(UidTable* t, const std::string& key) {
    uid_t uid = 0;
    Status s = t->Get(key, &uid);
    EXPECT_TRUE(s.ok()) << key << ": " << s.ToString();
    return uid;
  }
  TempDir dir_;
  const std::string path_ = dir_.sub("state/sandbox-uids");
};

TEST_F(UidTableTest, ManyIdentitiesGetDistinctUidsInTheRange) {
  auto t = Open();
  std::set<uid_t> seen;
  const uid_t victim = Get(t.get(), "/ws/o1/victim");
  EXPECT_NE(victim, Get(t.get(), "/ws/o2/x405521"));
  seen.insert(victim);
  for (int i = 0; i < 200; ++i) {
    const uid_t uid = Get(t.get(), "/ws/org" + std::to_string(i % 7) + "/agent" + std::to_string(i));
    EXPECT_GE(uid, kSandboxUidBase);
    EXPECT_LT(uid, kSandboxUidBase + kSandboxUidRange);
    seen.insert(uid);
  }
  EXPECT_EQ(seen.size(), 201u);
  EXPECT_EQ(Get(t.get(), "/ws/o1/victim"), victim) << "asked again: the same uid";
}

TEST_F(UidTableTest, AnIdentityKeepsItsUidAcrossARestart) {
  auto t = Open();
  const uid_t a = Get(t.get(), "/ws/o1/a"), b = Get(t.get(), "/ws/o1/weird\nname\\x");
  t.reset();
  t = Open();
  EXPECT_EQ(Get(t.get(), "/ws/o1/weird\nname\\x"), b);
  EXPECT_EQ(Get(t.get(), "/ws/o1/a"), a);
  const uid_t c = Get(t.get(), "/ws/o1/c");
  EXPECT_GT(c, std::max(a, b)) << "a new identity gets the next free uid, none reused";
}

TEST_F(UidTableTest, ConcurrentProcessesAndThreadsNeverHandOutOneUidTwice) {
  constexpr int kProcs = 4, kThreads = 3, kKeys = 25;
  // Each worker asks for kKeys identities shared by everyone and kKeys of
  // its own, and writes "<key> <uid>" lines to its own file.
  auto work = [this](const std::string& me, UidTable* shared_table) {
    std::unique_ptr<UidTable> own;
    if (shared_table == nullptr && !UidTable::Open(path_, kSandboxUidBase, kSandboxUidRange, &own).ok())
      return false;
    UidTable* t = shared_table != nullptr ? shared_table : own.get();
    std::ofstream out(dir_.sub("out-" + me));
    for (int i = 0; i < kKeys; ++i) {
      for (const std::string& key :
           {"/ws/shared/" + std::to_string(i), "/ws/" + me + "/" + std::to_string(i)}) {
        uid_t uid = 0;
        if (!t->Get(key, &uid).ok()) return false;
        out << key << " " << uid << "\n";
      }
    }
    return static_cast<bool>(out.flush());
  };
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(work("p" + std::to_string(p), nullptr) ? 0 : 1);
    kids.push_back(pid);
  }
  auto shared = Open();
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int i = 0; i < kThreads; ++i) {
    // Half the threads share one table object, half open their own.
    threads.emplace_back(
        [&, i] { failed += !work("t" + std::to_string(i), i % 2 == 0 ? shared.get() : nullptr); });
  }
  for (auto& th : threads) th.join();
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(failed, 0);
  std::map<std::string, uid_t> uid_of;
  std::map<uid_t, std::string> key_of;
  size_t lines = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    if (entry.path().filename().string().rfind("out-", 0) != 0) continue;
    std::istringstream in(ReadAll(entry.path()));
    std::string key;
    uid_t uid;
    while (in >> key >> uid) {
      ++lines;
      EXPECT_EQ(uid_of.emplace(key, uid).first->second, uid) << key << " was given two uids";
      EXPECT_EQ(key_of.emplace(uid, key).first->second, key)
          << "uid " << uid << " was given to two identities";
    }
  }
  EXPECT_EQ(lines, size_t{(kProcs + kThreads) * kKeys * 2});
  EXPECT_EQ(uid_of.size(), size_t{kKeys + (kProcs + kThreads) * kKeys});
}

TEST_F(UidTableTest, AFullTableFailsClosed) {
  auto t = Open(3);
  std::set<uid_t> seen;
  for (const char* key : {"/ws/a", "/ws/b", "/ws/c"}) seen.insert(Get(t.get(), key));
  EXPECT_EQ(seen.size(), 3u);
  uid_t uid = 0;
  Status s = t->Get("/ws/d", &uid);
  EXPECT_EQ(s.code(), "E_SANDBOX_UNAVAILABLE");
  EXPECT_NE(s.message().find("full"), std::string::npos) << s.message();
  EXPECT_TRUE(t->Get("/ws/b", &uid).ok()) << "identities already recorded keep running";
  t = Open(3);
  EXPECT_EQ(t->Get("/ws/e", &uid).code(), "E_SANDBOX_UNAVAILABLE") << "still full after a restart";
}

TEST_F(UidTableTest, ALineTornByACrashIsDroppedAndACorruptOneFailsClosed) {
  std::filesystem::create_directories(dir_.sub("state"));
  std::ofstream(path_) << "1000000 /ws/a\n1000001 /ws/b";  // the append of /ws/b cut short
  auto t = Open();
  EXPECT_EQ(Get(t.get(), "/ws/a"), 1000000u);
  EXPECT_EQ(Get(t.get(), "/ws/c"), 1000001u) << "the torn line's uid was never handed out";
  EXPECT_EQ(ReadAll(path_), "1000000 /ws/a\n1000001 /ws/c\n");
  t.reset();
  for (const std::string bad : {"1000000 /ws/a\nnot a line\n", "1000000 /ws/a\n1000000 /ws/b\n",
                                "1000000 /ws/a\n1000001 /ws/a\n", "999999 /ws/a\n", "1000000 /ws/\\q\n"}) {
    std::ofstream(path_, std::ios::trunc) << bad;
    std::unique_ptr<UidTable> u;
    EXPECT_EQ(UidTable::Open(path_, kSandboxUidBase, kSandboxUidRange, &u).code(), "E_SANDBOX_UNAVAILABLE")
        << bad;
    EXPECT_EQ(ReadAll(path_), bad) << "a corrupt table is left as it was";
  }
}

}  // namespace
}  // namespace tollgate
