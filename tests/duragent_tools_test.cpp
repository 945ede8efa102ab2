// Duragent's web, session and memory built-ins (issue 30; docs/tools.md,
// "web", "session", "memory"). web runs against loopback servers (a page
// server, a fake Brave Search API); session and memory run as real calls:
// decided by the real policy engine, executed by the real execute stage,
// their events appended to a real RocksDB log that the tools read back
// through LogAuditReader. Traffic only goes to 127.0.0.1.
#include <condition_variable>
#include <csignal>
#include <cstdlib>

#include "audit/event_log.h"
#include "audit/log_audit_reader.h"
#include "audit/log_sink.h"
#include "execute/tools/html_markdown.h"
#include "execute/tools/html_text.h"
#include "tests/execute_test_util.h"
#include "tests/http_pipeline_fixture.h"

namespace tollgate {
namespace {

using testing::kT0;
using testing::RecordingServer;
using testing::ToolFixture;

// --- HTML to Markdown ---

TEST(HtmlMarkdown, APageBecomesMarkdownWithAbsoluteLinksAndNoScripts) {
  const std::string html = R"HTML(<!DOCTYPE html><html><head><title>The &amp; Page</title>
<style>body { color: red }</style><script>var x = "<h1>no</h1>";</script></head><body>
<h1>Main   title</h1>
<p>Some <b>bold</b> and <em>soft</em> text,
   with a <a href="/docs/a?x=1">link</a> and <code>x = 1</code>.</p>
<noscript>enable js</noscript>
<ul><li>one</li><li>two<ul><li>inner</li></ul></li></ul>
<ol><li>first<li>second</ol>
<blockquote><p>quoted</p></blockquote>
<pre>line 1
  line 2</pre>
<table><tr><th>k</th><th>v</th></tr><tr><td>a|b</td><td>2</td></tr></table>
<p>&copy; 2026 &#x41;&#66; <a href="javascript:alert(1)">js</a> <a href="#top"></a></p>
</body></html>)HTML";
  MarkdownPage p = HtmlToMarkdown(html, "http://example.com/dir/page.html", 1 << 20);
  EXPECT_TRUE(p.complete);
  EXPECT_EQ(p.title, "The & Page");
  const std::string want =
      "# Main title\n\n"
      "Some **bold** and *soft* text, with a [link](http://example.com/docs/a?x=1) and `x = 1`.\n\n"
      "- one\n- two\n  - inner\n\n"
      "1. first\n2. second\n\n"
      "> quoted\n\n"
      "```\nline 1\n  line 2\n```\n\n"
      "| k | v |\n| --- | --- |\n| a\\|b | 2 |\n\n"
      "\xC2\xA9 2026 AB js";
  EXPECT_EQ(p.markdown, want);
}

TEST(HtmlMarkdown, HostilePagesStayLinearBoundedAndValidUtf8) {
  std::string deep;
  for (int i = 0; i < 200000; ++i) deep += "<blockquote><ul><li><b><a href=x>";
  deep += "\xff\xfe broken \xc3";
  const auto t0 = std::chrono::steady_clock::now();
  MarkdownPage p = HtmlToMarkdown(deep, "http://example.com/", 1 << 20);
  std::string links;
  for (int i = 0; i < 100000; ++i) links += "<a href=\"/p" + std::to_string(i) + "\">x</a><br>";
  MarkdownPage q = HtmlToMarkdown(links, "http://example.com/" + std::string(3000, 'a'), 256 << 10);
  MarkdownPage r =
      HtmlToMarkdown("<script>" + std::string(1 << 20, '<') + "<p>unterminated <a href='", "", 1 << 20);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 5.0) << "linear in the input";
  EXPECT_EQ(ToValidUtf8(p.markdown), p.markdown);
  EXPECT_FALSE(q.complete) << "stops once the Markdown passes its cap";
  EXPECT_LT(q.markdown.size(), (256u << 10) + 8192);
  EXPECT_EQ(r.markdown, "");
}

TEST(HtmlText, ReferencesAreDecodedAndMalformedOnesStayAsWritten) {
  EXPECT_EQ(DecodeCharRefs("a&amp;b &lt;&#x41;&#66;&mdash;&nbsp;x&shy;"), "a&b <AB\xE2\x80\x94 x");
  EXPECT_EQ(DecodeCharRefs("&#0;&#xD800;&#99999999999999;"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(DecodeCharRefs("&amp &unknown; &#x; &#12a; a&b=c;"), "&amp &unknown; &#x; &#12a; a&b=c;");
  EXPECT_EQ(FindClosingTag("<script>x</SCRIPT>", 8, "script"), 9u);
  EXPECT_EQ(FindClosingTag("<script>x</scrip", 8, "script"), std::string_view::npos);
}

// --- web ---

class WebTest : public ToolFixture, public ::testing::Test {
 protected:
  WebTest() {
    Cidr lo;
    ParseCidr("127.0.0.1/32", &lo);
    policy().allow_cidrs = {lo};
  }
  Json Fetch(const std::string& url) { return Call("web", {{"action", "fetch"}, {"url", url}}); }
};

TEST_F(WebTest, FetchGivesThePageAsMarkdownWithItsTitleAndFinalUrl) {
  RecordingServer s;
  s.handler = [](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/start") {
      res.status = 302;
      res.set_header("Location", "/docs/page");
      return;
    }
    res.set_content(
        "<html><head><title>Docs</title></head><body><h2>Hello</h2><p>See <a href='next'>next</a>.</p>"
        "</body></html>",
        "text/html; charset=utf-8");
  };
  Json r = Fetch(s.origin() + "/start");
  ASSERT_TRUE(r["success"]) << r.dump();
  const Json& d = r["data"];
  EXPECT_EQ(d["url"], s.origin() + "/start");
  EXPECT_EQ(d["final_url"], s.origin() + "/docs/page");
  EXPECT_EQ(d["status"], 200);
  EXPECT_EQ(d["content_type"], "text/html; charset=utf-8");
  EXPECT_EQ(d["title"], "Docs");
  EXPECT_EQ(d["markdown"], "## Hello\n\nSee [next](" + s.origin() + "/docs/next).");
  EXPECT_EQ(d["truncated"], false);
  EXPECT_GT(d["bytes"].get<int>(), 50);
}

TEST_F(WebTest, FetchKeepsOneMegabyteAndSaysTheRestWasCut) {
  RecordingServer s;
  s.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string((1 << 20) + 300000, 'x'), "text/plain");
  };
  Json r = Fetch(s.origin() + "/big");
  ASSERT_TRUE(r["success"]) << r.dump().substr(0, 300);
  EXPECT_EQ(r["data"]["bytes"], 1 << 20);
  EXPECT_EQ(r["data"]["download_truncated"], true);
  EXPECT_EQ(r["data"]["truncated"], true);
  EXPECT_LE(r["data"]["markdown"].get<std::string>().size(), 50u << 10);
}

// A loopback server whose every GET streams `total` bytes of text ("x",
// then 2-byte "é"s) in chunks for as long as the client reads. It records
// how much it wrote and whether the client hung up, and says when it
// stopped.
class StreamingServer {
 public:
  explicit StreamingServer(size_t total) : total_(total) {
    signal(SIGPIPE, SIG_IGN);  // writing to the closed socket is EPIPE, not the end of the test binary
    server_.handler = [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain; charset=utf-8", [this](size_t, httplib::DataSink& sink) {
        std::string chunk;
        for (int i = 0; i < 32 << 10; ++i) chunk += "\xC3\xA9";
        bool hung_up = !sink.write("x", 1);
        size_t sent = hung_up ? 0 : 1;
        while (!hung_up && sent < total_) {
          hung_up = !sink.write(chunk.data(), chunk.size());
          if (!hung_up) sent += chunk.size();
        }
        if (!hung_up) sink.done();
        std::lock_guard<std::mutex> lock(mu_);
        written_ = sent;
        hung_up_ = hung_up;
        ended_ = true;
        cv_.notify_all();
        return !hung_up;
      });
    };
  }
  std::string origin() const { return server_.origin(); }
  // Waits for the stream to stop (at most 20 s); false if it never did.
  bool WaitEnded() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [this] { return ended_; });
  }
  size_t written() {
    std::lock_guard<std::mutex> lock(mu_);
    return written_;
  }
  bool hung_up() {
    std::lock_guard<std::mutex> lock(mu_);
    return hung_up_;
  }

 private:
  const size_t total_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t written_ = 0;
  bool hung_up_ = false;
  bool ended_ = false;
  RecordingServer server_;  // last: stopped (its threads joined) before the state above goes
};

constexpr size_t kStreamBytes = 64 << 20;

TEST_F(WebTest, FetchEndsTheDownloadAtOneMegabyteRatherThanReadingTheRest) {
  StreamingServer s(kStreamBytes);
  Json r = Fetch(s.origin() + "/stream");
  ASSERT_TRUE(r["success"]) << r.dump().substr(0, 300);
  EXPECT_EQ(r["data"]["download_truncated"], true);
  EXPECT_EQ(r["data"]["bytes"], (1 << 20) - 1) << "1 MiB less the half of an \"é\" the cap split";
  ASSERT_TRUE(s.WaitEnded());
  EXPECT_TRUE(s.hung_up()) << "the client closed the connection mid-body";
  EXPECT_LT(s.written(), kStreamBytes / 4) << "the server wrote far less than its body";
}

TEST_F(WebTest, HttpRequestEndsATransferAtItsByteCapAndReportsTheBodyTruncated) {
  {
    StreamingServer s(kStreamBytes);
    policy().http_defaults = {{"max_response_chars", 1000}};  // a cap of 4004 bytes
    Json r = Call("http_request", {{"url", s.origin() + "/stream"}});
    ASSERT_TRUE(r["success"]) << r.dump().substr(0, 300);
    EXPECT_EQ(r["data"]["status"], 200);
    EXPECT_EQ(r["data"]["truncated"], true);
    std::string want = "x";
    for (int i = 0; i < 999; ++i) want += "\xC3\xA9";
    EXPECT_EQ(r["data"]["body"], want) << "max_response_chars characters";
    ASSERT_TRUE(s.WaitEnded());
    EXPECT_TRUE(s.hung_up());
    EXPECT_LT(s.written(), kStreamBytes / 4);
  }
  StreamingServer s(kStreamBytes);
  policy().http_defaults = {{"max_response_chars", 1000}, {"max_response_bytes", 100}};
  Json r = Call("http_request", {{"url", s.origin() + "/stream"}});
  ASSERT_TRUE(r["success"]) << r.dump().substr(0, 300);
  EXPECT_EQ(r["data"]["truncated"], true);
  EXPECT_EQ(r["data"]["body"].get<std::string>().size(), 99u) << "100 bytes less the split \"é\"";
  ASSERT_TRUE(s.WaitEnded());
  EXPECT_TRUE(s.hung_up());
}

TEST_F(WebTest, MarkdownOverFiftyKilobytesIsCutWithANoticeOfHowMuch) {
  RecordingServer s;
  std::string page = "<html><body>";
  for (int i = 0; i < 3000; ++i) page += "<p>paragraph number " + std::to_string(i) + " with some words</p>";
  s.handler = [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(page + "</body></html>", "text/html");
  };
  Json r = Fetch(s.origin() + "/");
  ASSERT_TRUE(r["success"]) << r.dump().substr(0, 300);
  const std::string md = r["data"]["markdown"];
  EXPECT_LE(md.size(), 50u << 10);
  EXPECT_NE(md.find("\n\n[truncated: "), std::string::npos);
  EXPECT_NE(md.find("bytes of Markdown omitted"), std::string::npos);
  EXPECT_EQ(r["data"]["markdown_truncated"], true);
  EXPECT_EQ(r["data"]["download_truncated"], false);
}

TEST_F(WebTest, ARedirectToARefusedAddressOrSchemeIsNotFollowed) {
  RecordingServer s;
  s.handler = [](const httplib::Request& req, httplib::Response& res) {
    res.status = 302;
    res.set_header("Location", req.path == "/other" ? "http://127.0.0.2:9/" : "file:///etc/passwd");
  };
  Json r = Fetch(s.origin() + "/other");
  EXPECT_EQ(Code(r), "E_URL_FORBIDDEN") << r.dump();
  r = Fetch(s.origin() + "/file");
  EXPECT_EQ(Code(r), "E_URL_FORBIDDEN") << r.dump();
  EXPECT_EQ(s.targets().size(), 2u) << "only the first hop of each reached a server";
  EXPECT_EQ(Code(Fetch("ftp://127.0.0.1/x")), "E_URL_FORBIDDEN");
  EXPECT_EQ(Code(Fetch("relative/path")), "E_URL_FORBIDDEN");
}

TEST_F(WebTest, FetchHoldsTheAgentsHostsButNeverSendsItsHttpRequestHeaders) {
  RecordingServer s;
  policy().orgs = Json::parse(R"({"o1":{"agents":{"a1":{"http_request":{"hosts":["docs.example.com"]}},
      "a2":{"http_request":{"default_headers":{"Authorization":"Bearer api-secret"}}}}}})");
  EXPECT_EQ(Code(Fetch(s.origin() + "/")), "E_URL_FORBIDDEN") << "a1 may only read docs.example.com";
  Json r = Call("web", {{"action", "fetch"}, {"url", s.origin() + "/"}}, "o1", "a2");
  ASSERT_TRUE(r["success"]) << r.dump();
  EXPECT_EQ(s.last_headers().count("Authorization"), 0u) << "a2's API credential is not for every page";
}

// A fake Brave Search API on loopback.
TEST_F(WebTest, SearchAsksTheConfiguredBraveEndpointAndMapsItsResults) {
  RecordingServer brave;
  brave.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"type":"search","web":{"results":[
        {"title":"Tollgate <strong>docs</strong>","url":"https://docs.example.com/a","description":"The &amp; gate"},
        {"title":"no url"},
        {"title":"Two","url":"https://two.example.com/","description":"second"},
        {"title":"Three","url":"https://three.example.com/","description":"third"}]}})",
                    "application/json");
  };
  setenv("TG_TEST_BRAVE_KEY", "brave-secret-1", 1);
  policy().web_api_key = "${env:TG_TEST_BRAVE_KEY}";
  policy().web_search_url = brave.origin() + "/res/v1/web/search";
  Json r = Call("web", {{"action", "search"}, {"query", "tollgate docs & more"}, {"count", 2}});
  ASSERT_TRUE(r["success"]) << r.dump();
  ASSERT_EQ(brave.targets().size(), 1u);
  EXPECT_EQ(brave.targets()[0], "/res/v1/web/search?q=tollgate%20docs%20%26%20more&count=2");
  EXPECT_EQ(brave.last_headers().find("X-Subscription-Token")->second, "brave-secret-1");
  const Json want = Json::parse(R"([
      {"title":"Tollgate **docs**","url":"https://docs.example.com/a","description":"The & gate"},
      {"title":"Two","url":"https://two.example.com/","description":"second"}])");
  EXPECT_EQ(r["data"]["results"], want);
  EXPECT_EQ(r["data"]["count"], 2);
  EXPECT_EQ(r.dump().find("brave-secret-1"), std::string::npos) << "the key is never in the result";
  unsetenv("TG_TEST_BRAVE_KEY");
}

TEST_F(WebTest, ASearchAPISlowerThanItsTimeoutIsATimeoutNotAHang) {
  // The seed's 30 s, shortened here by execute.web.timeout_ms.
  RecordingServer slow;
  slow.handler = [](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    res.set_content(R"({"web":{"results":[]}})", "application/json");
  };
  setenv("TG_TEST_BRAVE_KEY", "k", 1);
  policy().web_api_key = "${env:TG_TEST_BRAVE_KEY}";
  policy().web_search_url = slow.origin() + "/res/v1/web/search";
  policy().web_timeout_ms = 300;
  const auto t0 = std::chrono::steady_clock::now();
  Json r = Call("web", {{"action", "search"}, {"query", "q"}});
  EXPECT_FALSE(r["success"]) << r.dump();
  EXPECT_NE(Code(r).find("TIMEOUT"), std::string::npos) << r.dump();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1400))
      << "it did not wait for the answer";
  unsetenv("TG_TEST_BRAVE_KEY");
}

TEST_F(WebTest, SearchWithoutAKeySaysItIsNotConfiguredAndHow) {
  unsetenv("BRAVE_API_KEY");
  Json r = Call("web", {{"action", "search"}, {"query", "anything"}});
  EXPECT_EQ(Code(r), "E_NOT_CONFIGURED");
  EXPECT_EQ(r["error"]["recoverable"], false);
  const std::string msg = r["error"]["message"];
  EXPECT_NE(msg.find("web search is not configured"), std::string::npos) << msg;
  EXPECT_NE(msg.find("BRAVE_API_KEY"), std::string::npos) << msg;
  EXPECT_NE(msg.find("execute.web.api_key"), std::string::npos) << msg;
}

TEST(DuragentConfig, TheExecuteSectionsAreReadAndCheckedFailClosed) {
  ExecutePolicy p;
  ASSERT_TRUE(ExecutePolicyFromJson(Json::parse(R"({"execute":{"web":{"search_url":"http://127.0.0.1:1/s",
      "api_key":"${env:K}","timeout_ms":5000},"session":{"scope":"org"},
      "memory":{"llm":{"url":"http://127.0.0.1:2/v1/chat/completions","model":"m","api_key":"${env:L}"}}}})"),
                                    "/tmp", &p)
                  .ok());
  EXPECT_EQ(p.web_search_url, "http://127.0.0.1:1/s");
  EXPECT_EQ(p.web_api_key, "${env:K}");
  EXPECT_EQ(p.web_timeout_ms, 5000);
  EXPECT_EQ(p.session_scope, "org");
  EXPECT_EQ(p.memory_llm_model, "m");
  ASSERT_TRUE(ExecutePolicyFromJson(Json::object(), "/tmp", &p).ok());
  EXPECT_EQ(p.web_api_key, "${env:BRAVE_API_KEY}");
  EXPECT_EQ(p.session_scope, "agent");
  for (const char* bad : {R"({"session":{"scope":"world"}})", R"({"web":{"search_url":"ftp://x/"}})",
                          R"({"web":{"key":"x"}})", R"({"memory":{"llm":{"url":"http://x/"}}})"}) {
    EXPECT_FALSE(ExecutePolicyFromJson({{"execute", Json::parse(bad)}}, "/tmp", &p).ok()) << bad;
  }
}

// --- session and memory, over a real log ---

class DuragentLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(EventLog::Open(dir_.sub("log"), LogOptions{}, &log_).ok());
    sink_ = std::make_unique<LogSink>(*log_);
    reader_ = std::make_unique<LogAuditReader>(log_->store());
    Load("");
  }
  // The policy, with `execute` as the execute section (YAML, indented by 2).
  void Load(const std::string& execute) {
    // Mode ask with the seed's allow pattern for memory (its writes mutate).
    const std::string yaml =
        "mode: ask\nallow: [\"builtin:memory:*\"]\n" + (execute.empty() ? "" : "execute:\n" + execute);
    PolicyPtr p;
    Status s = LoadPolicyYaml(yaml, "test.yaml", &p);
    ASSERT_TRUE(s.ok()) << s.ToString();
    pif_.SetFile(p);
    auto ep = std::make_shared<ExecutePolicy>();
    ASSERT_TRUE(ExecutePolicyFromJson(p->doc(), dir_.path(), ep.get()).ok());
    ExecuteConfig c;
    c.policy = ep;
    c.audit = reader_.get();
    stage_ = std::make_unique<ExecuteStage>(c);
  }
  // One call: request.received, the real decision, the real execute stage;
  // every event in the log. The ToolResult as execution.completed holds it.
  Json Call(const std::string& org, const std::string& agent, const std::string& session,
            const std::string& tool, const Json& args) {
    const std::string rid = "rq-" + std::to_string(++n_);
    const int64_t t = kT0 + n_ * 1'000'000;
    Flow f;
    f.request = {{"request_id", rid},     {"org_id", org}, {"agent_id", agent},
                 {"session_id", session}, {"tool", tool},  {"args", args}};
    f.received_at = FormatTime(t);
    f.args_hash = ArgsHash(args);
    f.decision = tollgate::Decide(pif_, BudgetLedger(), DecideInput{&f.request, t});
    if (f.decision.value("verdict", "") != "allow") {
      ADD_FAILURE() << tool << " not allowed: " << f.decision.dump();
      return Json();
    }
    std::string canon;
    EXPECT_TRUE(CanonicalBytes(f.request, &canon).ok());
    Append({FlowEvent(f, "request.received", t,
                      {{"request", f.request},
                       {"received_at", f.received_at},
                       {"args_hash", f.args_hash},
                       {"content_hash", Sha256Hex(canon)},
                       {"source", "test"},
                       {"redacted", Json::array()}}),
            FlowEvent(f, "decision.made", t + 1, f.decision)});
    StoreLogView view(log_->store());
    StageResult r = stage_->Process(MessageFor(topics_.execute(), f.request, f.ToJson()),
                                    {t + 2, "inc/tollgate.execute/0/" + std::to_string(n_)}, view);
    Append(r.events);
    if (r.deferred) {
      StageResult done = r.deferred();
      Append(done.events);
      r.events = done.events;
    }
    for (const auto& e : r.events) {
      if (e.type == "execution.completed") return e.data["result"];
    }
    ADD_FAILURE() << "no execution.completed for " << rid;
    return Json();
  }
  void Append(std::vector<Event> events) {
    std::vector<EventSink::Appended> out;
    sink_->AppendAll(std::move(events), &out);
    for (const auto& a : out) ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  }
  static std::string Code(const Json& r) {
    return r.contains("error") && r["error"].is_object() ? r["error"].value("code", "") : "";
  }
  static std::vector<std::string> Ids(const Json& list, const char* key) {
    std::vector<std::string> out;
    for (const auto& e : list) out.push_back(e.value(key, ""));
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<LogSink> sink_;
  std::unique_ptr<LogAuditReader> reader_;
  PolicyInForce pif_;
  Topics topics_;
  std::unique_ptr<ExecuteStage> stage_;
  int n_ = 0;
};

// o1/a1 works in s1 then s2, o1/a2 in s3, and o2/a1 (another org, same
// agent and session ids) in s1 and s9.
void History(DuragentLogTest* t,
             const std::function<Json(const std::string&, const std::string&, const std::string&,
                                      const std::string&, const Json&)>& call) {
  call("o1", "a1", "s1", "echo", {{"text", "hello"}});
  call("o1", "a1", "s1", "calculate", {{"expression", "1 + 2"}});
  call("o2", "a1", "s1", "echo", {{"text", "other org"}});
  call("o1", "a2", "s3", "echo", {{"text", "colleague"}});
  call("o1", "a1", "s2", "echo", {{"text", "second session"}});
  call("o2", "a1", "s9", "echo", {{"text", "other org only"}});
  (void)t;
}

TEST_F(DuragentLogTest, SessionListIsTheAgentsOwnSessionsNewestFirst) {
  History(this, [&](auto o, auto a, auto s, auto tool, auto args) { return Call(o, a, s, tool, args); });
  Json r = Call("o1", "a1", "s2", "session", {{"action", "list"}});
  ASSERT_TRUE(r.value("success", false)) << r.dump();
  const Json& list = r["data"]["sessions"];
  EXPECT_EQ(Ids(list, "session_id"), (std::vector<std::string>{"s2", "s1"}));
  EXPECT_EQ(r["data"]["scope"], "agent");
  EXPECT_EQ(list[1]["requests"], 2);
  EXPECT_EQ(list[1]["tools"], Json::array({"calculate", "echo"}));
  EXPECT_EQ(list[1]["first_time"], FormatTime(kT0 + 1'000'000));
  EXPECT_EQ(list[1]["last_time"], FormatTime(kT0 + 2'000'000));
  EXPECT_EQ(list[0]["current"], true);
  EXPECT_EQ(list[0]["requests"], 2) << "its echo and this very call";
}

TEST_F(DuragentLogTest, SessionReadGivesEachRequestWithItsVerdictStatusAndResult) {
  History(this, [&](auto o, auto a, auto s, auto tool, auto args) { return Call(o, a, s, tool, args); });
  Json r = Call("o1", "a1", "s2", "session", {{"action", "read"}, {"session_id", "s1"}});
  ASSERT_TRUE(r.value("success", false)) << r.dump();
  const Json& e = r["data"]["entries"];
  ASSERT_EQ(e.size(), 2u) << "o2's s1 is not o1's";
  EXPECT_EQ(e[0]["tool"], "echo");
  EXPECT_EQ(e[0]["args"], Json({{"text", "hello"}}));
  EXPECT_EQ(e[0]["verdict"], "allow");
  EXPECT_EQ(e[0]["status"], "completed");
  EXPECT_EQ(e[1]["tool"], "calculate");
  EXPECT_EQ(e[1]["result"]["success"], true);
  EXPECT_NE(e[1]["result"]["summary"].get<std::string>().find("3"), std::string::npos);
  r = Call("o1", "a1", "s2", "session", {{"action", "read"}, {"session_id", "s1"}, {"limit", 1}});
  ASSERT_EQ(r["data"]["entries"].size(), 1u);
  EXPECT_EQ(r["data"]["entries"][0]["tool"], "calculate") << "the last N";
  EXPECT_EQ(r["data"]["truncated"], true);
}

TEST_F(DuragentLogTest, AnotherAgentsOrAnotherOrgsSessionIsNotFoundUnderScopeAgent) {
  History(this, [&](auto o, auto a, auto s, auto tool, auto args) { return Call(o, a, s, tool, args); });
  Json r = Call("o1", "a1", "s2", "session", {{"action", "read"}, {"session_id", "s3"}});
  EXPECT_EQ(Code(r), "E_SESSION_NOT_FOUND") << r.dump();
  r = Call("o1", "a1", "s2", "session", {{"action", "read"}, {"session_id", "s9"}});
  EXPECT_EQ(Code(r), "E_SESSION_NOT_FOUND") << "another org's session looks like none";
  EXPECT_EQ(Code(Call("o1", "a1", "s2", "session", {{"action", "read"}, {"session_id", "nope"}})),
            "E_SESSION_NOT_FOUND");
}

TEST_F(DuragentLogTest, ScopeOrgShowsTheOrgsOtherAgentsButNeverAnotherOrg) {
  Load("  session: {scope: org}\n");
  History(this, [&](auto o, auto a, auto s, auto tool, auto args) { return Call(o, a, s, tool, args); });
  Json r = Call("o1", "a1", "s2", "session", {{"action", "list"}});
  ASSERT_TRUE(r.value("success", false)) << r.dump();
  EXPECT_EQ(r["data"]["scope"], "org");
  EXPECT_EQ(Ids(r["data"]["sessions"], "session_id"), (std::vector<std::string>{"s2", "s3", "s1"}));
  EXPECT_EQ(r["data"]["sessions"][1]["agent_id"], "a2");
  r = Call("o1", "a1", "s2", "session", {{"action", "read"}, {"session_id", "s3"}});
  ASSERT_TRUE(r.value("success", false)) << r.dump();
  EXPECT_EQ(r["data"]["entries"][0]["args"]["text"], "colleague");
  EXPECT_EQ(Code(Call("o1", "a1", "s2", "session", {{"action", "read"}, {"session_id", "s9"}})),
            "E_SESSION_NOT_FOUND");
  r = Call("o2", "a1", "s9", "session", {{"action", "list"}});
  EXPECT_EQ(Ids(r["data"]["sessions"], "session_id"), (std::vector<std::string>{"s9", "s1"}))
      << "o2 sees o2 only";
}

TEST_F(DuragentLogTest, MemoryIsFoldedFromTheLogPerAgent) {
  Json r = Call(
      "o1", "a1", "s1", "memory",
      {{"action", "remember"}, {"content", "The deploy script lives in ops/deploy.sh"}, {"tags", {"ops"}}});
  ASSERT_TRUE(r.value("success", false)) << r.dump();
  const std::string first = r["data"]["memory_id"];
  EXPECT_EQ(first.rfind("mem_", 0), 0u);
  Call("o1", "a1", "s2", "memory",
       {{"action", "remember"}, {"content", "Staging database is read-only on Fridays"}});
  Call("o1", "a1", "s2", "memory", {{"action", "update_world"}, {"content", "v1 world"}});
  Call("o1", "a1", "s2", "memory", {{"action", "update_world"}, {"content", "v2 world: prod is eu-west"}});
  Call("o1", "a2", "s1", "memory", {{"action", "remember"}, {"content", "a2's own deploy notes"}});
  Call("o2", "a1", "s1", "memory", {{"action", "remember"}, {"content", "o2's deploy notes"}});
  Call("o1", "a1", "s1", "echo", {{"text", "remember this deploy"}});  // not a memory call

  r = Call("o1", "a1", "s3", "memory", {{"action", "recall"}});
  ASSERT_TRUE(r.value("success", false)) << r.dump();
  const Json& d = r["data"];
  ASSERT_EQ(d["memories"].size(), 2u) << d.dump();
  EXPECT_EQ(d["memories"][0]["content"], "Staging database is read-only on Fridays") << "newest first";
  EXPECT_EQ(d["memories"][1]["memory_id"], first);
  EXPECT_EQ(d["memories"][1]["tags"], Json::array({"ops"}));
  EXPECT_EQ(d["world"]["content"], "v2 world: prod is eu-west") << "the newest update_world";

  r = Call("o1", "a1", "s3", "memory", {{"action", "recall"}, {"query", "DEPLOY ops"}});
  ASSERT_EQ(r["data"]["memories"].size(), 1u) << r.dump();
  EXPECT_EQ(r["data"]["memories"][0]["memory_id"], first);
  EXPECT_EQ(r["data"]["memories"][0]["score"], 2);

  r = Call("o1", "a1", "s3", "memory", {{"action", "recall"}, {"limit", 1}});
  EXPECT_EQ(r["data"]["memories"].size(), 1u);
  r = Call("o1", "a2", "s3", "memory", {{"action", "recall"}});
  EXPECT_EQ(Ids(r["data"]["memories"], "content"), std::vector<std::string>{"a2's own deploy notes"});
  EXPECT_TRUE(r["data"]["world"].is_null());
}

TEST_F(DuragentLogTest, ReflectWithoutAModelSaysItIsNotConfigured) {
  Call("o1", "a1", "s1", "memory", {{"action", "remember"}, {"content", "something"}});
  Json r = Call("o1", "a1", "s1", "memory", {{"action", "reflect"}});
  EXPECT_EQ(Code(r), "E_NOT_CONFIGURED") << r.dump();
  EXPECT_NE(r["error"]["message"].get<std::string>().find("execute.memory.llm"), std::string::npos);
}

TEST_F(DuragentLogTest, ReflectSummarisesThroughTheConfiguredModelAndIsRecalledAsAMemory) {
  RecordingServer llm;
  llm.handler = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        R"({"choices":[{"message":{"role":"assistant","content":"Deploys need care on Fridays."}}]})",
        "application/json");
  };
  setenv("TG_TEST_LLM_KEY", "llm-secret-2", 1);
  Load("  network: {allow_cidrs: [127.0.0.1/32]}\n  memory: {llm: {url: \"" + llm.origin() +
       "/v1/chat/completions\", model: tiny, api_key: \"${env:TG_TEST_LLM_KEY}\"}}\n");
  Call("o1", "a1", "s1", "memory", {{"action", "remember"}, {"content", "Deploy failed on Friday"}});
  Json r = Call("o1", "a1", "s1", "memory", {{"action", "reflect"}});
  ASSERT_TRUE(r.value("success", false)) << r.dump();
  EXPECT_EQ(r["data"]["content"], "Deploys need care on Fridays.");
  EXPECT_EQ(r["data"]["memories_used"], 1);
  ASSERT_EQ(llm.targets().size(), 1u);
  EXPECT_EQ(llm.targets()[0], "/v1/chat/completions");
  EXPECT_EQ(llm.last_headers().find("Authorization")->second, "Bearer llm-secret-2");
  const Json sent = Json::parse(llm.bodies()[0]);
  EXPECT_EQ(sent["model"], "tiny");
  EXPECT_NE(sent["messages"][1]["content"].get<std::string>().find("Deploy failed on Friday"),
            std::string::npos);
  r = Call("o1", "a1", "s2", "memory", {{"action", "recall"}, {"query", "fridays"}});
  ASSERT_EQ(r["data"]["memories"].size(), 1u) << r.dump();
  EXPECT_EQ(r["data"]["memories"][0]["kind"], "reflection");
  unsetenv("TG_TEST_LLM_KEY");
}

}  // namespace
}  // namespace tollgate
