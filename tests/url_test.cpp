// core/url.h as a unit: RFC 3986 reference resolution and normalisation,
// the one function decide matches against and execute fetches.
#include "core/url.h"

#include <gtest/gtest.h>

#include "core/invocation.h"

namespace tollgate {
namespace {

std::string Norm(const std::string& ref, const std::string& base = "") {
  NormalUrl u;
  std::string why;
  return NormalizeUrl(ref, base, &u, &why) ? u.full : "ERR: " + why;
}

TEST(Url, RelativeReferencesResolvePerRfc3986) {
  const std::string base = "http://a/b/c/d;p?q";
  // RFC 3986 §5.4.1 and §5.4.2 (fragments dropped).
  const std::pair<const char*, const char*> cases[] = {
      {"g", "http://a/b/c/g"},
      {"./g", "http://a/b/c/g"},
      {"g/", "http://a/b/c/g/"},
      {"/g", "http://a/g"},
      {"//g", "http://g/"},
      {"?y", "http://a/b/c/d;p?y"},
      {"g?y", "http://a/b/c/g?y"},
      {"#s", "http://a/b/c/d;p?q"},
      {"g#s", "http://a/b/c/g"},
      {";x", "http://a/b/c/;x"},
      {"", "http://a/b/c/d;p?q"},
      {".", "http://a/b/c/"},
      {"./", "http://a/b/c/"},
      {"..", "http://a/b/"},
      {"../", "http://a/b/"},
      {"../g", "http://a/b/g"},
      {"../..", "http://a/"},
      {"../../g", "http://a/g"},
      {"../../../g", "http://a/g"},
      {"../../../../g", "http://a/g"},
      {"/./g", "http://a/g"},
      {"/../g", "http://a/g"},
      {"g.", "http://a/b/c/g."},
      {".g", "http://a/b/c/.g"},
      {"g..", "http://a/b/c/g.."},
      {"..g", "http://a/b/c/..g"},
      {"./../g", "http://a/b/g"},
      {"./g/.", "http://a/b/c/g/"},
      {"g/./h", "http://a/b/c/g/h"},
      {"g/../h", "http://a/b/c/h"},
      {"g;x=1/./y", "http://a/b/c/g;x=1/y"},
      {"g;x=1/../y", "http://a/b/c/y"},
      {"g?y/./x", "http://a/b/c/g?y/./x"},
      {"http://x/./y", "http://x/y"},
  };
  for (const auto& [ref, want] : cases) EXPECT_EQ(Norm(ref, base), want) << ref;
}

TEST(Url, PercentEncodingCaseHostAndPortAreNormalised) {
  EXPECT_EQ(Norm("HTTP://Example.COM:80/%7euser/%2e%2e/x"), "http://example.com/x") << "%2e%2e is ..";
  EXPECT_EQ(Norm("https://h:443/a%2fb%2Fc"), "https://h/a%2Fb%2Fc") << "%2F stays encoded, upper-cased";
  EXPECT_EQ(Norm("https://h:0443/"), "https://h/");
  EXPECT_EQ(Norm("http://h:8080/a b\"c"), "http://h:8080/a%20b%22c");
  EXPECT_EQ(Norm("http://127.1:81/"), "http://127.0.0.1:81/");
  EXPECT_EQ(Norm("http://0x7f000001/"), "http://127.0.0.1/");
  EXPECT_EQ(Norm("http://[0:0:0:0:0:0:0:1]:80/"), "http://[::1]/");
  EXPECT_EQ(Norm("http://h/p?"), "http://h/p");
  EXPECT_EQ(Norm("http://h"), "http://h/");
  EXPECT_EQ(Norm("%2e%2e/x", "http://h/api/v1/"), "http://h/api/x");
}

TEST(Url, WhatIsNotAPlainHttpUrlIsRefused) {
  for (const char* bad :
       {"file:///etc/passwd", "ftp://h/", "javascript:alert(1)", "http://user:pw@h/", "http://h/%zz",
        "http://h/a\\b", "http:///x", "http://h:99999/", "http://h:0/", "http://[::1%25eth0]/",
        "http://h\x01/", "http://256.1.1.1/", "/relative", "http://h/\n"}) {
    EXPECT_EQ(Norm(bad).rfind("ERR: ", 0), 0u) << bad;
  }
  NormalUrl u;
  std::string why;
  ASSERT_TRUE(NormalizeUrl("http://u:p@other:81/x", "http://h/", &u, &why, Userinfo::kDrop)) << why;
  EXPECT_EQ(u.full, "http://other:81/x") << "a redirect's userinfo is dropped";
}

TEST(Url, InvocationsUseTheNormalisedUrlAndQuery) {
  Json args{{"url", "./admin/x"}, {"query", {{"b", "1 2"}, {"a", "/"}}}};
  EXPECT_EQ(BuildInvocation("http_request", args, "http://127.0.0.1:9/api/"),
            "http_request:GET http://127.0.0.1:9/api/admin/x?a=%2F&b=1%202");
  EXPECT_EQ(BuildInvocation("execute_command", {{"command", "ls"}, {"args", {"-l", "x"}}}, ""),
            "bash:ls -l x");
  EXPECT_EQ(FileSubject("read_file", {{"path", "a//b/./../c"}}), "read_file:a/c");
  EXPECT_EQ(FileSubject("echo", {{"path", "a"}}), "");
}

TEST(Url, PathsNormaliseLexically) {
  EXPECT_EQ(NormalizePath("/a/../../etc"), "/../etc");
  EXPECT_EQ(NormalizePath("a/./b//c/.."), "a/b");
  EXPECT_EQ(NormalizePath("../x"), "../x");
}

}  // namespace
}  // namespace tollgate
