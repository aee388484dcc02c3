// PEP 691 JSON and PEP 503 HTML output: exact bytes, what is kept and dropped, escaping, determinism.
#include "proxy/pypi/page_render.h"

#include <gtest/gtest.h>

#include <string>

namespace capsule::proxy::pypi {
namespace {

using nlohmann::json;

// One wheel uploaded before the cutoff (yanked with a hostile reason, dict core-metadata, an upload-time in a
// non-canonical but valid spelling that must come out unchanged) and one after it.
constexpr const char* kUpstream = R"json({
  "meta": {"_last-serial": 4242, "api-version": "1.4"}, "name": "demo", "versions": ["1.0", "2.0"],
  "alternate-locations": ["https://elsewhere.example/simple/demo/"], "project-status": {"status": "active"},
  "files": [
    {"filename": "demo-1.0-py3-none-any.whl", "url": "https://files.example/demo-1.0-py3-none-any.whl#frag",
     "hashes": {"sha256": "3493868954bcde70e76d9e07f19991a2ac454d7308d9c4d687156306c8289c85"},
     "requires-python": ">=3.7,<4",
     "core-metadata": {"sha256": "fff3e89997cd77482c015cd3df55792e3b6e68d85eacbc0bb1f9e8df52681cb3"},
     "dist-info-metadata": {"sha256": "fff3e89997cd77482c015cd3df55792e3b6e68d85eacbc0bb1f9e8df52681cb3"},
     "gpg-sig": false, "yanked": "\"<>&'", "size": 5321, "upload-time": "2023-04-10T14:00:00.1234560+02:00",
     "provenance": "https://pypi.org/integrity/demo/1.0/demo-1.0-py3-none-any.whl/provenance"},
    {"filename": "demo-2.0.tar.gz", "url": "https://files.example/demo-2.0.tar.gz",
     "hashes": {"sha256": "8b1f823119182c1c66341d455f0d5e55cfd9d184def36e06e60ff32afea18953"},
     "size": 1, "upload-time": "2024-01-01T00:00:00Z", "yanked": false}
  ]})json";

std::string proxy_url(const File& file) { return "/pypi/snapshot/2023-04-11T00:00:00Z/files/" + file.filename; }

ProjectPage filtered() {
  return filter_page(parse_project_json(kUpstream), parse_cutoff("2023-04-11").value().at, {});
}

TEST(RenderJson, ExactBytes) {
  EXPECT_EQ(render_project_json(filtered(), proxy_url),
            R"({"files":[{)"
            R"("core-metadata":{"sha256":"fff3e89997cd77482c015cd3df55792e3b6e68d85eacbc0bb1f9e8df52681cb3"},)"
            R"("data-dist-info-metadata":)"
            R"({"sha256":"fff3e89997cd77482c015cd3df55792e3b6e68d85eacbc0bb1f9e8df52681cb3"},)"
            R"("filename":"demo-1.0-py3-none-any.whl","gpg-sig":false,)"
            R"("hashes":{"sha256":"3493868954bcde70e76d9e07f19991a2ac454d7308d9c4d687156306c8289c85"},)"
            R"("requires-python":">=3.7,<4","size":5321,"upload-time":"2023-04-10T14:00:00.1234560+02:00",)"
            R"("url":"/pypi/snapshot/2023-04-11T00:00:00Z/files/demo-1.0-py3-none-any.whl",)"
            R"("yanked":"\"<>&'"}],)"
            R"("meta":{"_last-serial":4242,"api-version":"1.1"},"name":"demo","versions":["1.0"]})");
}

TEST(RenderJson, KeepsWhatClientsNeedAndDropsTheRest) {
  const std::string out = render_project_json(filtered(), proxy_url);
  const json document = json::parse(out);
  EXPECT_EQ(document["meta"]["api-version"], "1.1");
  EXPECT_EQ(document["versions"], json({"1.0"}));
  ASSERT_EQ(document["files"].size(), 1u);
  // Never the bare key pip 23.0 crashes on; nothing of api 1.2+ (PEP 708, 740) leaks through.
  for (const char* absent : {"\"dist-info-metadata\"", "provenance", "alternate-locations", "project-status",
                             "tracks", "2.0", "#frag"})
    EXPECT_EQ(out.find(absent), std::string::npos) << absent;
  EXPECT_EQ(render_project_json(filtered(), proxy_url), out);  // deterministic
}

TEST(RenderJson, RoundTripsAndOmitsUnknowns) {
  ProjectPage page;
  page.name = "bare";
  page.last_serial = "0123";  // not plain decimal: stays a string, so it reads back the same
  page.versions = {"1"};
  File file;
  file.filename = "bare-1.tar.gz";
  file.version = "1";
  page.files.push_back(file);
  const std::string out = render_project_json(page, [](const File& f) { return "u/" + f.filename; });
  EXPECT_EQ(out, R"({"files":[{"filename":"bare-1.tar.gz","hashes":{},"url":"u/bare-1.tar.gz","yanked":false}],)"
                 R"("meta":{"_last-serial":"0123","api-version":"1.1"},"name":"bare","versions":["1"]})");
  const ProjectPage again = parse_project_json(out);
  EXPECT_EQ(again.last_serial, "0123");
  EXPECT_EQ(again.files.at(0).version, "1");
  EXPECT_EQ(render_project_json(again, [](const File& f) { return "u/" + f.filename; }), out);

  // Invalid UTF-8 from the URL callback is replaced, not thrown on.
  EXPECT_NO_THROW((void)render_project_json(page, [](const File&) { return std::string("\xff\xfe"); }));
}

TEST(RenderHtml, ExactBytesWithEveryAttributeEscaped) {
  EXPECT_EQ(render_project_html(filtered(), proxy_url),
            "<!DOCTYPE html>\n"
            "<html>\n"
            "  <head>\n"
            "    <meta charset=\"utf-8\">\n"
            "    <meta name=\"pypi:repository-version\" content=\"1.1\">\n"
            "    <title>Links for demo</title>\n"
            "  </head>\n"
            "  <body>\n"
            "    <h1>Links for demo</h1>\n"
            "    <a href=\"/pypi/snapshot/2023-04-11T00:00:00Z/files/demo-1.0-py3-none-any.whl"
            "#sha256=3493868954bcde70e76d9e07f19991a2ac454d7308d9c4d687156306c8289c85\""
            " data-requires-python=\"&gt;=3.7,&lt;4\""
            " data-yanked=\"&quot;&lt;&gt;&amp;&#x27;\""
            " data-core-metadata=\"sha256=fff3e89997cd77482c015cd3df55792e3b6e68d85eacbc0bb1f9e8df52681cb3\""
            " data-dist-info-metadata=\"sha256=fff3e89997cd77482c015cd3df55792e3b6e68d85eacbc0bb1f9e8df52681cb3\""
            " data-gpg-sig=\"false\""
            " data-upload-time=\"2023-04-10T14:00:00.1234560+02:00\">demo-1.0-py3-none-any.whl</a><br />\n"
            "  </body>\n"
            "</html>\n");
}

TEST(RenderHtml, YankedWithoutReasonHashFallbackAndHostileText) {
  ProjectPage page;
  page.name = "x<script>";
  File file;
  file.filename = "x-1.0.tar.gz&<>\"'";
  file.hashes = {{"md5", "9dd4e461268c8034f5c8564e155c67a6"}, {"blake2b_256", "ab"}};
  file.yanked = true;
  file.core_metadata = true;
  page.files.push_back(file);
  file.filename = "x-2.0.tar.gz";
  file.hashes.clear();
  file.yanked = false;
  file.core_metadata = false;
  page.files.push_back(file);
  const std::string out = render_project_html(page, [](const File& f) {
    return "https://h/\"onmouseover='x'#old" + f.filename.substr(0, 1);
  });
  EXPECT_NE(out.find("<title>Links for x&lt;script&gt;</title>"), std::string::npos) << out;
  // No sha256: the first algorithm in name order; the URL's own fragment is replaced.
  EXPECT_NE(out.find("<a href=\"https://h/&quot;onmouseover=&#x27;x&#x27;#blake2b_256=ab\" data-yanked=\"\""
                     " data-core-metadata=\"true\" data-dist-info-metadata=\"true\">"
                     "x-1.0.tar.gz&amp;&lt;&gt;&quot;&#x27;</a>"),
            std::string::npos)
      << out;
  // No hashes: the URL as given; not yanked and no metadata: no such attributes.
  EXPECT_NE(out.find("<a href=\"https://h/&quot;onmouseover=&#x27;x&#x27;#oldx\">x-2.0.tar.gz</a>"),
            std::string::npos)
      << out;
  // Exactly the markup we wrote: 13 tags for the page, 3 per file (<a>, </a>, <br />), no '<' from the data.
  std::size_t tags = 0;
  for (const char c : out) tags += c == '<';
  EXPECT_EQ(tags, 13 + 3 * page.files.size()) << out;
}

TEST(RenderIndex, JsonAndHtml) {
  const ProjectIndex index = parse_index_json(
      R"({"meta": {"_last-serial": 7, "api-version": "1.4"}, "projects": [{"name": "Demo.Pkg"}, {"name": "b"}]})");
  EXPECT_EQ(render_index_json(index),
            R"({"meta":{"_last-serial":7,"api-version":"1.1"},"projects":[{"name":"Demo.Pkg"},{"name":"b"}]})");
  const std::string html = render_index_html(index);
  EXPECT_NE(html.find("<meta name=\"pypi:repository-version\" content=\"1.1\">"), std::string::npos);
  EXPECT_NE(html.find("    <a href=\"demo-pkg/\">Demo.Pkg</a>\n    <a href=\"b/\">b</a>\n"), std::string::npos) << html;
}

TEST(HtmlEscape, AllFiveCharacters) {
  EXPECT_EQ(html_escape("a&b<c>d\"e'f"), "a&amp;b&lt;c&gt;d&quot;e&#x27;f");
  EXPECT_EQ(html_escape("é \xff"), "é \xff");
}

}  // namespace
}  // namespace capsule::proxy::pypi
