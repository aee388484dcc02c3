// Url: the accepted and refused forms of absolute http(s) URLs, and RFC 3986 section 5.4 reference resolution
// (fragments are dropped, so the examples' "#s" never shows in a result).
#include "proxy/upstream/url.h"

#include <gtest/gtest.h>

namespace capsule::proxy {
namespace {

TEST(Url, ParsesSchemesHostsPortsAndTargets) {
  struct Case {
    const char* text;
    const char* scheme;
    const char* host;
    unsigned short port;
    const char* target;
    const char* str;
  };
  const Case cases[] = {
      {"http://example.org", "http", "example.org", 80, "/", "http://example.org/"},
      {"HTTPS://Example.ORG:8443/a/b?c=d#frag", "https", "example.org", 8443, "/a/b?c=d",
       "https://example.org:8443/a/b?c=d"},
      {"https://files.pythonhosted.org/packages/ab/cd/demo-1.0.tar.gz", "https", "files.pythonhosted.org", 443,
       "/packages/ab/cd/demo-1.0.tar.gz", "https://files.pythonhosted.org/packages/ab/cd/demo-1.0.tar.gz"},
      {"https://h:443/x", "https", "h", 443, "/x", "https://h/x"},
      {"http://h:443/x", "http", "h", 443, "/x", "http://h:443/x"},
      {"http://h:/x", "http", "h", 80, "/x", "http://h/x"},
      {"http://127.0.0.1:65535?q=1", "http", "127.0.0.1", 65535, "/?q=1", "http://127.0.0.1:65535/?q=1"},
      {"http://[::1]:8080/simple/", "http", "::1", 8080, "/simple/", "http://[::1]:8080/simple/"},
      {"https://[2001:DB8::1]", "https", "2001:db8::1", 443, "/", "https://[2001:db8::1]/"},
      {"http://my_host.example~x/a/../b", "http", "my_host.example~x", 80, "/a/../b",
       "http://my_host.example~x/a/../b"},
  };
  for (const Case& c : cases) {
    const auto url = parse_url(c.text);
    ASSERT_TRUE(url) << c.text;
    EXPECT_EQ(url->scheme, c.scheme) << c.text;
    EXPECT_EQ(url->host, c.host) << c.text;
    EXPECT_EQ(url->port, c.port) << c.text;
    EXPECT_EQ(url->target, c.target) << c.text;
    EXPECT_EQ(url->str(), c.str) << c.text;
  }
  EXPECT_EQ(parse_url("http://[::1]:8080/x")->authority(), "[::1]:8080");
  EXPECT_EQ(parse_url("https://Pypi.org/simple/")->origin(), "https://pypi.org");
}

TEST(Url, RefusesOtherSchemesUserinfoBadPortsAndBadBytes) {
  for (const char* bad :
       {"", "ftp://example.org/x", "file:///etc/passwd", "mailto:a@example.org", "//example.org/x", "/simple/",
        "http:/x", "http://", "http:///x", "http://user@example.org/", "http://u:p@example.org/",
        "http://example.org /", "http://example.org/a b", "http://example.org/a\tb", "http://example.org/\x01",
        "http://example.org/\x7f", "http://example.org/\xc3\xa9", "http://h:0/", "http://h:65536/",
        "http://h:8x/", "http://h:-1/", "http://h:123456/", "http://h:1:2/", "http://[::1/", "http://[::1]x/",
        "http://[]/", "http://[v1.fe]/", "http://[fe80::1%25eth0]/", "http://h%41/", "http://h\\x/",
        "http://exa mple.org/"}) {
    EXPECT_FALSE(parse_url(bad)) << bad;
  }
}

TEST(Url, ResolvesRfc3986NormalExamples) {
  const char* base = "http://a/b/c/d;p?q";
  const std::pair<const char*, const char*> cases[] = {
      {"g:h", "g:h"},
      {"g", "http://a/b/c/g"},
      {"./g", "http://a/b/c/g"},
      {"g/", "http://a/b/c/g/"},
      {"/g", "http://a/g"},
      {"//g", "http://g"},
      {"?y", "http://a/b/c/d;p?y"},
      {"g?y", "http://a/b/c/g?y"},
      {"#s", "http://a/b/c/d;p?q"},
      {"g#s", "http://a/b/c/g"},
      {"g?y#s", "http://a/b/c/g?y"},
      {";x", "http://a/b/c/;x"},
      {"g;x", "http://a/b/c/g;x"},
      {"g;x?y#s", "http://a/b/c/g;x?y"},
      {"", "http://a/b/c/d;p?q"},
      {".", "http://a/b/c/"},
      {"./", "http://a/b/c/"},
      {"..", "http://a/b/"},
      {"../", "http://a/b/"},
      {"../g", "http://a/b/g"},
      {"../..", "http://a/"},
      {"../../", "http://a/"},
      {"../../g", "http://a/g"},
  };
  for (const auto& c : cases) EXPECT_EQ(resolve_url(base, c.first), c.second) << c.first;
}

TEST(Url, ResolvesRfc3986AbnormalExamples) {
  const char* base = "http://a/b/c/d;p?q";
  const std::pair<const char*, const char*> cases[] = {
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
      {"g?y/../x", "http://a/b/c/g?y/../x"},
      {"g#s/./x", "http://a/b/c/g"},
      {"g#s/../x", "http://a/b/c/g"},
      {"http:g", "http:g"},
  };
  for (const auto& c : cases) EXPECT_EQ(resolve_url(base, c.first), c.second) << c.first;
}

TEST(Url, ResolvesPageRelativeFileUrls) {
  EXPECT_EQ(resolve_url("https://pypi.org/simple/demo/", "../../packages/demo-1.0.tar.gz#sha256=ab"),
            "https://pypi.org/packages/demo-1.0.tar.gz");
  EXPECT_EQ(resolve_url("https://pypi.org/simple/demo/", "https://files.pythonhosted.org/p/demo-1.0.whl"),
            "https://files.pythonhosted.org/p/demo-1.0.whl");
  EXPECT_EQ(resolve_url("mirror:/simple/demo/", "../../files/demo-1.0-py3-none-any.whl"),
            "mirror:/files/demo-1.0-py3-none-any.whl");
  EXPECT_EQ(resolve_url("mirror:/simple/demo/", "../../../../etc/passwd"), "mirror:/etc/passwd");
  EXPECT_EQ(resolve_url("http://a", "g"), "http://a/g");
}

TEST(Url, ResolveRefusesRelativeBasesAndBadBytes) {
  EXPECT_FALSE(resolve_url("/simple/demo/", "g"));
  EXPECT_FALSE(resolve_url("", "g"));
  EXPECT_FALSE(resolve_url("http://a/b", "g h"));
  EXPECT_FALSE(resolve_url("http://a/b c", "g"));
  EXPECT_FALSE(resolve_url("http://a/b", "g\n"));
}

}  // namespace
}  // namespace capsule::proxy
