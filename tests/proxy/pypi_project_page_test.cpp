// Reading PEP 691 project pages as pypi.org serves them, refusing malformed ones, and the date mask.
#include "http/error_status.h"
#include "proxy/pypi/project_page.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proxy/error.h"

namespace capsule::proxy::pypi {
namespace {

using nlohmann::json;

// Shaped like https://pypi.org/simple/<project>/ with Accept: application/vnd.pypi.simple.v1+json (api 1.4):
// microsecond upload-times, provenance, project-status, alternate-locations, a yank reason, dict-valued
// core-metadata next to the legacy key, a version without files (3.0) and one undated file (0.8).
constexpr const char* kDemoPage = R"json({
  "alternate-locations": [],
  "files": [
    {"core-metadata": false, "data-dist-info-metadata": false, "filename": "demo_pkg-0.8.zip",
     "hashes": {"sha256": "fe6725d8b92040c40f44a0adfe6727d337ba91504e6e8bb71509222eae45daab"}, "provenance": null,
     "requires-python": null, "url": "https://files.pythonhosted.org/packages/aa/bb/demo_pkg-0.8.zip",
     "yanked": false},
    {"core-metadata": false, "data-dist-info-metadata": false, "filename": "demo_pkg-0.9.tar.gz",
     "hashes": {"sha256": "44a1865465b2cb4160a789fa838cdccf5cf8791b14b8648a0edf4f8c3d591d49"}, "provenance": null,
     "requires-python": null, "size": 10240, "upload-time": "2022-12-31T23:59:59.999999Z",
     "url": "https://files.pythonhosted.org/packages/44/a1/demo_pkg-0.9.tar.gz", "yanked": false},
    {"core-metadata": {"sha256": "fff3e89997cd77482c015cd3df55792e3b6e68d85eacbc0bb1f9e8df52681cb3"},
     "data-dist-info-metadata": {"sha256": "fff3e89997cd77482c015cd3df55792e3b6e68d85eacbc0bb1f9e8df52681cb3"},
     "filename": "demo_pkg-1.0-py3-none-any.whl",
     "hashes": {"md5": "9dd4e461268c8034f5c8564e155c67a6",
                "sha256": "3493868954bcde70e76d9e07f19991a2ac454d7308d9c4d687156306c8289c85"},
     "provenance": "https://pypi.org/integrity/demo-pkg/1.0/demo_pkg-1.0-py3-none-any.whl/provenance",
     "requires-python": ">=3.7, <4", "size": 5321, "upload-time": "2023-04-10T12:00:00.123456Z",
     "url": "https://files.pythonhosted.org/packages/34/93/demo_pkg-1.0-py3-none-any.whl",
     "yanked": "broken \"<metadata>\" & 'more'"},
    {"core-metadata": false, "data-dist-info-metadata": false, "filename": "Demo-Pkg-1.0.tar.gz", "gpg-sig": true,
     "hashes": {"sha256": "4908de2c97295c180ed05c2fa61be2c8f84e496782f4a838d1493352de88b133"}, "provenance": null,
     "requires-python": ">=3.7, <4", "size": 4100, "upload-time": "2023-04-10T12:00:01.000000Z",
     "url": "https://files.pythonhosted.org/packages/49/08/Demo-Pkg-1.0.tar.gz", "yanked": true},
    {"core-metadata": {"sha256": "ff062af048e75aa9f00d9f484af5716c1dfe8a74cea72f09202d0fffd6e926dd"},
     "data-dist-info-metadata": {"sha256": "ff062af048e75aa9f00d9f484af5716c1dfe8a74cea72f09202d0fffd6e926dd"},
     "filename": "demo_pkg-1.1rc1-py3-none-any.whl",
     "hashes": {"sha256": "de28addb3d29216f1548ea95c681c68bf844705215932adeacb7eb5a9bb0559d"}, "provenance": null,
     "requires-python": ">=3.8", "size": 5400, "upload-time": "2023-04-11T00:00:00.000000Z",
     "url": "https://files.pythonhosted.org/packages/de/28/demo_pkg-1.1rc1-py3-none-any.whl", "yanked": false},
    {"core-metadata": true, "data-dist-info-metadata": true, "filename": "demo_pkg-2.0-py3-none-any.whl",
     "hashes": {"sha256": "8b1f823119182c1c66341d455f0d5e55cfd9d184def36e06e60ff32afea18953"},
     "provenance": "https://pypi.org/integrity/demo-pkg/2.0/demo_pkg-2.0-py3-none-any.whl/provenance",
     "requires-python": ">=3.9", "size": 5500, "upload-time": "2024-06-01T08:30:00.000000Z",
     "url": "https://files.pythonhosted.org/packages/8b/1f/demo_pkg-2.0-py3-none-any.whl", "yanked": false,
     "future-key": {"nested": [1, 2, 3]}}
  ],
  "meta": {"_last-serial": 24155813, "api-version": "1.4"},
  "name": "demo-pkg",
  "project-status": {"status": "active"},
  "versions": ["0.8", "0.9", "1.0", "1.1rc1", "2.0", "3.0"]
})json";

Micros at(const char* text) { return parse_cutoff(text).value().at; }

std::vector<std::string> filenames(const ProjectPage& page) {
  std::vector<std::string> out;
  for (const auto& file : page.files) out.push_back(file.filename);
  return out;
}

TEST(ProjectPage, ParsesPypiOrgShape) {
  const ProjectPage page = parse_project_json(kDemoPage);
  EXPECT_EQ(page.name, "demo-pkg");
  EXPECT_EQ(page.last_serial, "24155813");
  EXPECT_EQ(page.versions, (std::vector<std::string>{"0.8", "0.9", "1.0", "1.1rc1", "2.0", "3.0"}));
  ASSERT_EQ(page.files.size(), 6u);

  const File& undated = page.files[0];
  EXPECT_FALSE(undated.upload_time);
  EXPECT_FALSE(undated.upload_time_text);
  EXPECT_FALSE(undated.size);
  EXPECT_FALSE(undated.requires_python);
  EXPECT_EQ(undated.core_metadata, json(false));
  EXPECT_EQ(undated.version, "0.8");

  const File& wheel = page.files[2];
  EXPECT_EQ(wheel.filename, "demo_pkg-1.0-py3-none-any.whl");
  EXPECT_EQ(wheel.url, "https://files.pythonhosted.org/packages/34/93/demo_pkg-1.0-py3-none-any.whl");
  EXPECT_EQ(wheel.hashes.at("sha256"), "3493868954bcde70e76d9e07f19991a2ac454d7308d9c4d687156306c8289c85");
  EXPECT_EQ(wheel.hashes.at("md5"), "9dd4e461268c8034f5c8564e155c67a6");
  EXPECT_EQ(wheel.requires_python, ">=3.7, <4");
  EXPECT_EQ(wheel.core_metadata,
            json({{"sha256", "fff3e89997cd77482c015cd3df55792e3b6e68d85eacbc0bb1f9e8df52681cb3"}}));
  EXPECT_EQ(wheel.yanked, json("broken \"<metadata>\" & 'more'"));
  EXPECT_EQ(wheel.size, 5321u);
  EXPECT_EQ(wheel.upload_time_text, "2023-04-10T12:00:00.123456Z");
  EXPECT_EQ(wheel.upload_time, at("2023-04-10T12:00:00Z") + 123456);
  EXPECT_FALSE(wheel.gpg_sig);
  EXPECT_EQ(wheel.version, "1.0");

  const File& sdist = page.files[3];
  EXPECT_EQ(sdist.version, "1.0");  // "Demo-Pkg" matched against "demo-pkg"
  EXPECT_EQ(sdist.yanked, json(true));
  EXPECT_EQ(sdist.gpg_sig, true);
  EXPECT_EQ(page.files[4].version, "1.1rc1");
  EXPECT_EQ(page.files[5].core_metadata, json(true));

  EXPECT_EQ(find_file(page, "Demo-Pkg-1.0.tar.gz"), &page.files[3]);
  EXPECT_EQ(find_file(page, "demo-pkg-1.0.tar.gz"), nullptr);  // filenames are exact
  EXPECT_EQ(find_file(page, ""), nullptr);
}

TEST(ProjectPage, OlderMetadataKeysAndApiVersions) {
  // api 1.0 (no versions, no upload-time), the PEP 658 key only, the bare key pip 23.0 choked on.
  const ProjectPage page = parse_project_json(R"({"meta": {"api-version": "1.0", "_last-serial": "17"},
    "name": "Old.Name", "files": [
      {"filename": "old_name-2.0-py2.py3-none-any.whl", "url": "../../f/a.whl", "hashes": {},
       "data-dist-info-metadata": {"sha256": "ABCDEF0123"}},
      {"filename": "Old.Name-1.5.tar.gz", "url": "b", "hashes": {}, "dist-info-metadata": true},
      {"filename": "old_name-2.0.tar.gz", "url": "c", "hashes": {}, "core-metadata": null,
       "dist-info-metadata": false}]})");
  EXPECT_EQ(page.last_serial, "17");
  EXPECT_EQ(page.versions, (std::vector<std::string>{"2.0", "1.5"}));
  EXPECT_EQ(page.files[0].core_metadata, json({{"sha256", "ABCDEF0123"}}));
  EXPECT_EQ(page.files[1].core_metadata, json(true));
  EXPECT_EQ(page.files[2].core_metadata, json(false));
  EXPECT_EQ(page.files[0].url, "../../f/a.whl");
  EXPECT_EQ(page.files[0].yanked, json(false));
  EXPECT_TRUE(page.files[0].hashes.empty());
}

TEST(ProjectPage, MalformedPagesAreBadUpstream) {
  const auto file = [](const std::string& fields) {
    return R"({"name": "demo", "files": [{"filename": "demo-1.0.tar.gz", "url": "u", "hashes": {})" + fields +
           "}]}";
  };
  const std::vector<std::string> bad = {
      "",
      "not json",
      "[]",
      R"({"name": "demo", "files": [)",
      R"({"files": []})",
      R"({"name": 7, "files": []})",
      R"({"name": "", "files": []})",
      R"({"name": "demo"})",
      R"({"name": "demo", "files": {}})",
      R"({"name": "demo", "files": [1]})",
      R"({"name": "demo", "files": [{"url": "u"}]})",
      R"({"name": "demo", "files": [{"filename": "a/b.whl", "url": "u"}]})",
      R"({"name": "demo", "files": [{"filename": "..\\b.whl", "url": "u"}]})",
      R"({"name": "demo", "files": [{"filename": "", "url": "u"}]})",
      R"({"name": "demo", "files": [{"filename": "..", "url": "u"}]})",
      R"({"name": "demo", "files": [{"filename": "a\nb", "url": "u"}]})",
      R"({"name": "demo", "files": [{"filename": "a.whl"}]})",
      R"({"name": "demo", "files": [{"filename": "a.whl", "url": ""}]})",
      R"({"name": "demo", "files": [{"filename": "a.whl", "url": "u"}, {"filename": "a.whl", "url": "v"}]})",
      R"({"name": "demo", "files": [], "versions": "1.0"})",
      R"({"name": "demo", "files": [], "versions": [1.0]})",
      R"({"name": "demo", "files": [], "meta": {"api-version": "2.0"}})",
      R"({"name": "demo", "files": [], "meta": {"api-version": 1.0}})",
      R"({"name": "demo", "files": [], "meta": {"_last-serial": -1}})",
      R"({"name": "demo", "files": [], "meta": []})",
      file(R"(, "hashes": {"sha256": "xyz"})"),
      file(R"(, "hashes": {"sha256": ""})"),
      file(R"(, "hashes": {"sha 256": "ab"})"),
      file(R"(, "hashes": {"sha256": 12})"),
      file(R"(, "hashes": ["ab"])"),
      file(R"(, "size": -1)"),
      file(R"(, "size": "12")"),
      file(R"(, "size": 1.5)"),
      file(R"(, "upload-time": "2023-04-11")"),
      file(R"(, "upload-time": "yesterday")"),
      file(R"(, "upload-time": 1681171200)"),
      file(R"(, "yanked": 1)"),
      file(R"(, "yanked": {})"),
      file(R"(, "core-metadata": "yes")"),
      file(R"(, "core-metadata": {"sha256": "zz"})"),
      file(R"(, "data-dist-info-metadata": 1)"),
      file(R"(, "requires-python": 3)"),
      file(R"(, "gpg-sig": "true")"),
  };
  for (const auto& body : bad) {
    try {
      (void)parse_project_json(body);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ProxyError& e) {
      EXPECT_EQ(capsule::http::status_for(e.code()), 502u) << body;
      EXPECT_EQ(e.code(), "bad_upstream") << body;
      EXPECT_EQ(e.cause().step, "pypi-page") << body;
      EXPECT_FALSE(e.cause().detail.empty()) << body;
    }
  }
  // The subject names the project once the name is known.
  try {
    (void)parse_project_json(file(R"(, "size": -1)"));
    ADD_FAILURE();
  } catch (const ProxyError& e) {
    EXPECT_EQ(e.cause().path, "demo");
    EXPECT_NE(e.cause().detail.find("demo-1.0.tar.gz"), std::string::npos) << e.cause().detail;
  }
  // Still fine: unknown keys, nulls for optional fields, no meta, a filename we cannot read a version from.
  const ProjectPage page = parse_project_json(file(R"(, "size": null, "yanked": null, "x": [{}])"));
  EXPECT_EQ(page.files.at(0).yanked, json(false));
  EXPECT_EQ(parse_project_json(file(R"(, "yanked": "")")).files.at(0).yanked, json(true));
  EXPECT_EQ(parse_project_json(R"({"name": "d", "files": [{"filename": "d.rpm", "url": "u"}]})").files[0].version, "");
}

TEST(Filter, StrictlyBeforeTheCutoff) {
  const ProjectPage page = parse_project_json(kDemoPage);
  // demo_pkg-1.1rc1 was uploaded at exactly 2023-04-11T00:00:00.000000Z.
  const ProjectPage at_boundary = filter_page(page, at("2023-04-11"), {});
  EXPECT_EQ(filenames(at_boundary), (std::vector<std::string>{"demo_pkg-0.9.tar.gz", "demo_pkg-1.0-py3-none-any.whl",
                                                              "Demo-Pkg-1.0.tar.gz"}));
  EXPECT_EQ(at_boundary.versions, (std::vector<std::string>{"0.9", "1.0"}));
  EXPECT_EQ(at_boundary.name, "demo-pkg");
  EXPECT_EQ(at_boundary.last_serial, "24155813");

  const ProjectPage one_micro_later = filter_page(page, at("2023-04-11") + 1, {});
  EXPECT_EQ(one_micro_later.files.size(), 4u);
  EXPECT_EQ(one_micro_later.files.back().filename, "demo_pkg-1.1rc1-py3-none-any.whl");
  EXPECT_EQ(one_micro_later.versions, (std::vector<std::string>{"0.9", "1.0", "1.1rc1"}));

  // 0.9 was uploaded at 2022-12-31T23:59:59.999999Z: hidden at that instant, visible one microsecond later.
  EXPECT_TRUE(filter_page(page, at("2022-12-31T23:59:59.999999Z"), {}).files.empty());
  EXPECT_TRUE(filter_page(page, at("2022-12-31T23:59:59.999999Z"), {}).versions.empty());
  EXPECT_EQ(filter_page(page, at("2023-01-01"), {}).versions, (std::vector<std::string>{"0.9"}));
}

TEST(Filter, UndatedFilesOnlyWhenIncluded) {
  const ProjectPage page = parse_project_json(kDemoPage);
  EXPECT_EQ(find_file(filter_page(page, at("2030-01-01"), {}), "demo_pkg-0.8.zip"), nullptr);
  const ProjectPage with_undated = filter_page(page, at("2030-01-01"), {.include_undated = true});
  ASSERT_NE(find_file(with_undated, "demo_pkg-0.8.zip"), nullptr);
  EXPECT_EQ(find_file(with_undated, "demo_pkg-0.8.zip")->version, "0.8");
  // Far future: every file, but 3.0 (no files upstream) is still dropped.
  EXPECT_EQ(with_undated.files.size(), 6u);
  EXPECT_EQ(with_undated.versions, (std::vector<std::string>{"0.8", "0.9", "1.0", "1.1rc1", "2.0"}));
  EXPECT_EQ(filter_page(page, at("2030-01-01"), {}).versions,
            (std::vector<std::string>{"0.9", "1.0", "1.1rc1", "2.0"}));
  // An undated file before any cutoff is still undated: not shown.
  EXPECT_TRUE(filter_page(page, at("1990-01-01"), {}).files.empty());
  EXPECT_EQ(filenames(filter_page(page, at("1990-01-01"), {.include_undated = true})),
            (std::vector<std::string>{"demo_pkg-0.8.zip"}));
}

TEST(Filter, VersionsMatchedCanonicallyInUpstreamOrder) {
  // Upstream order is not sorted here on purpose; spellings differ between `versions` and the filenames.
  const ProjectPage page = parse_project_json(R"({"name": "Py-2to3", "files": [
      {"filename": "py_2to3-2.0.0-py3-none-any.whl", "url": "a", "upload-time": "2020-01-01T00:00:00Z"},
      {"filename": "py-2to3-1.0.0rc1.tar.gz", "url": "b", "upload-time": "2020-01-01T00:00:00Z"},
      {"filename": "py_2to3-1.0_post1-py3-none-any.whl", "url": "c", "upload-time": "2020-01-01T00:00:00Z"},
      {"filename": "py_2to3-3.0-py3-none-any.whl", "url": "d", "upload-time": "2021-01-01T00:00:00Z"}],
    "versions": ["v2.0", "1.0.0-RC.1", "1.0.post1", "3.0", "0.1"]})");
  EXPECT_EQ(page.files[1].version, "1.0.0rc1");  // the name part "py-2to3" holds "-2"
  const ProjectPage filtered = filter_page(page, at("2020-06-01"), {});
  EXPECT_EQ(filtered.versions, (std::vector<std::string>{"v2.0", "1.0.0-RC.1", "1.0.post1"}));
}

TEST(ProjectIndex, ParsesRootAndSkipsUnusableNames) {
  const ProjectIndex index = parse_index_json(R"({"meta": {"_last-serial": 99, "api-version": "1.1"},
    "projects": [{"name": "Demo.Pkg", "_last-serial": 5}, {"name": "../etc"}, {"name": "zope.interface"}]})");
  EXPECT_EQ(index.names, (std::vector<std::string>{"Demo.Pkg", "zope.interface"}));
  EXPECT_EQ(index.last_serial, "99");
  for (const char* bad : {"{}", R"({"projects": {}})", R"({"projects": [1]})", R"({"projects": [{"name": 1}]})",
                          R"({"projects": [], "meta": {"api-version": "3.0"}})", "nope"}) {
    try {
      (void)parse_index_json(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const ProxyError& e) {
      EXPECT_EQ(capsule::http::status_for(e.code()), 502u);
      EXPECT_EQ(e.code(), "bad_upstream");
    }
  }
}

}  // namespace
}  // namespace capsule::proxy::pypi
