// PyPI upstreams: the local mirror (pages, ETag/304, generated root index, file URLs, traversal and symlink
// escapes refused) and the HTTP index against a loopback server (Accept, If-None-Match, serial, statuses).
#include "http/error_status.h"
#include "proxy/upstream/pypi_upstream.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "proxy/error.h"
#include "tests/proxy/upstream_test_server.h"

namespace capsule::proxy {
namespace {

using testing::error_of;
using testing::LoopbackServer;
using testing::TestRequest;
using testing::TestResponse;

void write_text(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

std::string fetch(PypiUpstream& upstream, const std::string& url) {
  std::string body;
  upstream.fetch_file(url, [&](const char* data, std::size_t size) { body.append(data, size); });
  return body;
}

constexpr const char* kDemoPage =
    R"({"meta":{"api-version":"1.1"},"name":"demo","files":[{"filename":"demo-1.0+local-py3-none-any.whl",)"
    R"("url":"../../files/demo-1.0+local-py3-none-any.whl","hashes":{}}],"versions":["1.0"]})";

class LocalPypiMirrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "pypi-mirror-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    base_ = pattern;
    root_ = base_ / "mirror";
    write_text(root_ / "simple" / "demo" / "index.json", kDemoPage);
    write_text(root_ / "simple" / "other" / "index.json", R"({"name":"other","files":[]})");
    std::filesystem::create_directories(root_ / "simple" / "empty-dir");
    std::filesystem::create_directories(root_ / "simple" / ".hidden");
    write_text(root_ / "simple" / ".hidden" / "index.json", "{}");
    write_text(root_ / "files" / "demo-1.0+local-py3-none-any.whl", "wheel bytes");
    write_text(base_ / "secret.txt", "outside the mirror");
  }
  void TearDown() override { std::filesystem::remove_all(base_); }

  std::filesystem::path base_;
  std::filesystem::path root_;
};

TEST_F(LocalPypiMirrorTest, ProjectPageWithEtagAnd304) {
  auto mirror = make_local_pypi_mirror(root_);
  const UpstreamPage page = mirror->project_page("demo", "");
  EXPECT_EQ(page.status, 200u);
  EXPECT_EQ(page.body, kDemoPage);
  EXPECT_EQ(page.url, "mirror:/simple/demo/");
  ASSERT_GE(page.etag.size(), 3u);
  EXPECT_EQ(page.etag.front(), '"');
  EXPECT_EQ(page.etag.back(), '"');
  EXPECT_TRUE(page.last_serial.empty());

  const UpstreamPage again = mirror->project_page("demo", page.etag);
  EXPECT_EQ(again.status, 304u);
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(again.etag, page.etag);
  EXPECT_EQ(mirror->project_page("demo", "\"other\", W/" + page.etag).status, 304u);
  EXPECT_EQ(mirror->project_page("demo", "*").status, 304u);
  EXPECT_EQ(mirror->project_page("demo", "\"stale\"").status, 200u);

  write_text(root_ / "simple" / "demo" / "index.json", std::string(kDemoPage) + " ");
  const UpstreamPage changed = mirror->project_page("demo", page.etag);
  EXPECT_EQ(changed.status, 200u);
  EXPECT_NE(changed.etag, page.etag);
}

TEST_F(LocalPypiMirrorTest, MissingProjectIs404AndBadNamesAreRefused) {
  auto mirror = make_local_pypi_mirror(root_);
  EXPECT_EQ(mirror->project_page("absent", "").status, 404u);
  EXPECT_EQ(mirror->project_page("empty-dir", "").status, 404u);
  for (const char* name : {"Demo", "../demo", "de.mo", "", "demo/"}) {
    EXPECT_EQ(capsule::http::status_for(error_of([&] { mirror->project_page(name, ""); }).code()), 400u) << name;
  }
}

TEST_F(LocalPypiMirrorTest, RootIndexListsProjectDirectories) {
  auto mirror = make_local_pypi_mirror(root_);
  const UpstreamPage index = mirror->index_page("");
  EXPECT_EQ(index.status, 200u);
  EXPECT_EQ(index.url, "mirror:/simple/");
  EXPECT_EQ(index.body, R"({"meta":{"api-version":"1.0"},"projects":[{"name":"demo"},{"name":"other"}]})");
  EXPECT_EQ(mirror->index_page(index.etag).status, 304u);

  write_text(root_ / "simple" / "third" / "index.json", "{}");
  const UpstreamPage grown = mirror->index_page(index.etag);
  EXPECT_EQ(grown.status, 200u);
  EXPECT_NE(grown.body.find("third"), std::string::npos);

  write_text(root_ / "simple" / "index.json", R"({"projects":[]})");
  EXPECT_EQ(mirror->index_page("").body, R"({"projects":[]})");
}

TEST_F(LocalPypiMirrorTest, FetchesFilesByMirrorUrl) {
  auto mirror = make_local_pypi_mirror(root_);
  EXPECT_EQ(fetch(*mirror, "mirror:/files/demo-1.0+local-py3-none-any.whl"), "wheel bytes");
  EXPECT_EQ(fetch(*mirror, "mirror:/files/demo-1.0%2Blocal-py3-none-any.whl#sha256=00"), "wheel bytes");
  EXPECT_EQ(fetch(*mirror, "mirror:/simple/demo/../../files/./demo-1.0+local-py3-none-any.whl"), "wheel bytes");

  std::filesystem::create_symlink("../files/demo-1.0+local-py3-none-any.whl", root_ / "simple" / "inside-link.whl");
  EXPECT_EQ(fetch(*mirror, "mirror:/simple/inside-link.whl"), "wheel bytes") << "symlinks inside the mirror work";

  EXPECT_EQ(capsule::http::status_for(error_of([&] { fetch(*mirror, "mirror:/files/absent.whl"); }).code()), 404u);
  EXPECT_EQ(capsule::http::status_for(error_of([&] { fetch(*mirror, "mirror:/files"); }).code()), 404u) << "a directory is not a file";
  EXPECT_EQ(capsule::http::status_for(error_of([&] { fetch(*mirror, "https://example.org/files/x.whl"); }).code()), 404u);
}

TEST_F(LocalPypiMirrorTest, RefusesPathsLeavingTheMirror) {
  auto mirror = make_local_pypi_mirror(root_);
  for (const char* url : {"mirror:/../secret.txt", "mirror:/simple/../../secret.txt", "mirror:/%2E%2E/secret.txt",
                          "mirror:/files/..%2F..%2Fsecret.txt", "mirror:..", "mirror:/", "mirror:secret.txt",
                          "mirror:/files/%00x"}) {
    const ProxyError error = error_of([&] { fetch(*mirror, url); });
    EXPECT_EQ(capsule::http::status_for(error.code()), 404u) << url;
  }

  std::filesystem::create_symlink(base_ / "secret.txt", root_ / "files" / "absolute-escape.whl");
  std::filesystem::create_symlink("../../secret.txt", root_ / "files" / "relative-escape.whl");
  std::filesystem::create_symlink(base_, root_ / "files" / "dir-escape");
  for (const char* url : {"mirror:/files/absolute-escape.whl", "mirror:/files/relative-escape.whl",
                          "mirror:/files/dir-escape/secret.txt"}) {
    const ProxyError error = error_of([&] { fetch(*mirror, url); });
    EXPECT_EQ(capsule::http::status_for(error.code()), 404u) << url;
    EXPECT_NE(error.cause().detail.find("leaves the mirror"), std::string::npos) << url << ": " << error.what();
  }

  std::filesystem::create_directories(root_ / "simple" / "linked");
  std::filesystem::create_symlink(base_ / "secret.txt", root_ / "simple" / "linked" / "index.json");
  EXPECT_EQ(mirror->project_page("linked", "").status, 404u) << "a page symlinked outside is not served";
}

TEST_F(LocalPypiMirrorTest, MissingRootFailsAtConstruction) {
  EXPECT_EQ(capsule::http::status_for(error_of([&] { make_local_pypi_mirror(base_ / "absent"); }).code()), 502u);
  EXPECT_EQ(make_local_pypi_mirror(root_)->describe(), "mirror " + root_.string());
}

// ---- HTTP index against a loopback server ----

HttpClientOptions single_attempt() {
  HttpClientOptions options;
  options.max_attempts = 1;
  options.connect_timeout = std::chrono::milliseconds(5000);
  options.request_timeout = std::chrono::milliseconds(10000);
  return options;
}

TestResponse pypi_like(const TestRequest& request) {
  if (request.target == "/simple/demo/") {
    if (request.header("if-none-match") == "\"v1\"") return {304, {{"ETag", "\"v1\""}}, ""};
    return {200,
            {{"Content-Type", "application/vnd.pypi.simple.v1+json"},
             {"ETag", "\"v1\""},
             {"X-PyPI-Last-Serial", "4242"}},
            kDemoPage};
  }
  if (request.target == "/simple/") {
    return {200, {{"Content-Type", "application/vnd.pypi.simple.v1+json"}}, R"({"projects":[]})"};
  }
  if (request.target == "/simple/moved/") return {301, {{"Location", "/elsewhere/moved/"}}, ""};
  if (request.target == "/elsewhere/moved/") return {200, {{"Content-Type", "application/json"}}, "{}"};
  if (request.target == "/simple/html-only/") return {200, {{"Content-Type", "text/html"}}, "<html></html>"};
  if (request.target == "/simple/broken/") return {500, {}, "oops"};
  if (request.target == "/files/demo.whl") return {200, {{"Content-Type", "application/octet-stream"}}, "wheel bytes"};
  if (request.target == "/files/forbidden.whl") return {403, {}, "no"};
  return {404, {}, "not found"};
}

TEST(HttpPypiUpstream, ProjectPageSendsAcceptAndCapturesValidators) {
  LoopbackServer server(pypi_like);
  auto upstream = make_http_pypi_upstream(std::make_shared<HttpClient>(single_attempt()), server.url("/simple/"));
  const UpstreamPage page = upstream->project_page("demo", "");
  EXPECT_EQ(page.status, 200u);
  EXPECT_EQ(page.body, kDemoPage);
  EXPECT_EQ(page.etag, "\"v1\"");
  EXPECT_EQ(page.last_serial, "4242");
  EXPECT_EQ(page.url, server.url("/simple/demo/"));

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].header("accept"), "application/vnd.pypi.simple.v1+json");
  EXPECT_EQ(requests[0].header("if-none-match"), "");
}

TEST(HttpPypiUpstream, IfNoneMatchGives304) {
  LoopbackServer server(pypi_like);
  auto upstream = make_http_pypi_upstream(std::make_shared<HttpClient>(single_attempt()), server.url("/simple/"));
  const UpstreamPage page = upstream->project_page("demo", "\"v1\"");
  EXPECT_EQ(page.status, 304u);
  EXPECT_TRUE(page.body.empty());
  EXPECT_EQ(page.etag, "\"v1\"");
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].header("if-none-match"), "\"v1\"");
}

TEST(HttpPypiUpstream, StatusesAndFinalUrl) {
  LoopbackServer server(pypi_like);
  auto upstream = make_http_pypi_upstream(std::make_shared<HttpClient>(single_attempt()), server.url("/simple/"));
  EXPECT_EQ(upstream->project_page("absent", "").status, 404u);
  EXPECT_EQ(upstream->index_page("").body, R"({"projects":[]})");
  EXPECT_EQ(upstream->project_page("moved", "").url, server.url("/elsewhere/moved/"));

  const ProxyError broken = error_of([&] { upstream->project_page("broken", ""); });
  EXPECT_EQ(capsule::http::status_for(broken.code()), 502u);
  EXPECT_EQ(broken.code(), "bad_upstream");
  EXPECT_NE(broken.cause().detail.find("500"), std::string::npos) << broken.what();

  const ProxyError html = error_of([&] { upstream->project_page("html-only", ""); });
  EXPECT_EQ(capsule::http::status_for(html.code()), 502u);
  EXPECT_NE(html.cause().detail.find("text/html"), std::string::npos) << html.what();
  EXPECT_EQ(capsule::http::status_for(error_of([&] { upstream->project_page("Demo", ""); }).code()), 400u);
}

TEST(HttpPypiUpstream, FetchFileStreamsAndMapsStatuses) {
  LoopbackServer server(pypi_like);
  auto upstream = make_http_pypi_upstream(std::make_shared<HttpClient>(single_attempt()), server.url("/simple/"));
  EXPECT_EQ(fetch(*upstream, server.url("/files/demo.whl")), "wheel bytes");
  EXPECT_EQ(capsule::http::status_for(error_of([&] { fetch(*upstream, server.url("/files/absent.whl")); }).code()), 404u);
  EXPECT_EQ(capsule::http::status_for(error_of([&] { fetch(*upstream, server.url("/files/forbidden.whl")); }).code()), 502u);
  const std::size_t before = server.requests().size();
  EXPECT_EQ(capsule::http::status_for(error_of([&] { fetch(*upstream, "file:///etc/passwd"); }).code()), 502u);
  EXPECT_EQ(capsule::http::status_for(error_of([&] { fetch(*upstream, "mirror:/files/demo.whl"); }).code()), 502u);
  EXPECT_EQ(server.requests().size(), before) << "non-http URLs never reach the network";
}

}  // namespace
}  // namespace capsule::proxy
