// The fixture of the recipe image suite (CapsuledRecipes.*, in capsuled_recipes_test.cpp and
// capsuled_recipes_evidence_test.cpp): the recipe outputs of CAPSULE_RECIPE_DIR, one image store for the suite.
//
// The imports are slow (a 290 MB tarball for the JDK image), so the tests of this suite share one state dir (the
// image store): a test imports what it needs unless an earlier test already did; each test still starts its own
// daemon. Timings go to stdout as "[ recipes  ] ..." lines.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "daemon/config.h"
#include "http/unix_client.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {

using Clock = std::chrono::steady_clock;

inline constexpr const char* kHowToBuild =
    "build the recipe images first (root, needs the Debian mirror: images/recipes/README.md):\n"
    "  sudo images/recipes/all.sh   (python3, python3-base, jdk11/17/21-maven and the toolchain layers this machine has)\n"
    "then run with CAPSULE_RECIPE_DIR=/var/tmp/capsule-recipes (or the --out root used); scripts/test.sh does both";
inline constexpr const char* kToolchainPrefix = "org.capsule.toolchain.";
inline constexpr const char* kLayerBaseLabel = "org.capsule.layer.base";

// One recipe output directory: <name>/{labels.json, rootfs.tar.gz, rootfs/}.
struct Recipe {
  std::string name;  // the directory's name: python3, jdk17-maven, layer-python-3.12.1
  fs::path dir;
  fs::path source;  // what is imported: rootfs.tar.gz, else the rootfs/ tree (when the tarball is missing)
  fs::path tree;    // rootfs/ when the recipe kept it (not with --tar-only), else empty
  json labels;      // labels.json as the recipe wrote it: the image's labels, verbatim

  std::string toolchain(const std::string& tool) const { return labels.value(kToolchainPrefix + tool, ""); }
  // toolchain-layer.sh output: a tree under /opt plus /usr/local/bin links, for stacking on a base image.
  bool is_layer() const { return labels.contains("org.capsule.layer.path"); }
  // A recipe image under the ref the README imports it with, capsule/<recipe>:<suite> (the ref toolchain-layer.sh
  // --base names as a layer's base); a layer under recipes/<name>:latest.
  std::string ref() const {
    const std::string recipe = labels.value("org.capsule.recipe", ""), base = labels.value("org.capsule.base", "");
    if (is_layer() || recipe.empty() || !base.starts_with("debian:")) return "recipes/" + name + ":latest";
    return "capsule/" + recipe + ":" + base.substr(std::string("debian:").size());
  }
};

inline fs::path recipe_root() {
  const char* value = std::getenv("CAPSULE_RECIPE_DIR");
  return value != nullptr && *value != '\0' ? fs::path(value) : fs::path();
}

inline std::vector<Recipe> find_recipes(const fs::path& root) {
  std::vector<Recipe> found;
  std::error_code ec;
  if (root.empty() || !fs::is_directory(root, ec)) return found;
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && !name.starts_with(".")) dirs.push_back(entry.path());  // not .cache, .build.*
  }
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& dir : dirs) {
    if (!fs::is_regular_file(dir / "labels.json")) continue;
    Recipe recipe;
    recipe.name = dir.filename().string();
    recipe.dir = dir;
    recipe.labels = json::parse(slurp(dir / "labels.json"), nullptr, false);
    if (!recipe.labels.is_object()) {
      ADD_FAILURE() << dir / "labels.json" << " is not a JSON object";
      continue;
    }
    if (fs::is_directory(dir / "rootfs")) recipe.tree = dir / "rootfs";
    if (fs::is_regular_file(dir / "rootfs.tar.gz")) {
      recipe.source = dir / "rootfs.tar.gz";
    } else if (!recipe.tree.empty()) {
      recipe.source = recipe.tree;
    } else {
      continue;
    }
    found.push_back(std::move(recipe));
  }
  return found;
}

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline void note(const std::string& text) { std::cout << "[ recipes  ] " << text << std::endl; }

inline std::string megabytes(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::is_regular_file(path, ec) ? fs::file_size(path, ec) : 0;
  std::ostringstream out;
  out << (size + 500000) / 1000000 << " MB";
  return out.str();
}

inline std::string strip_ansi(const std::string& text) {
  return std::regex_replace(text, std::regex("\x1b\\[[0-9;]*[A-Za-z]"), "");
}

// "3.11.2" -> "3.11", "17.0.21.1" -> "17" (the prefixes a run asks for).
inline std::string major_minor(const std::string& version) {
  return version.substr(0, version.find('.', version.find('.') + 1));
}
inline std::string major(const std::string& version) { return version.substr(0, version.find('.')); }

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "<uid>:<gid> /usr/..." for every entry below `tree`/usr not owned by 0:0, sorted: what `find -printf` shows
// inside when the image keeps the tree's owners.
inline std::vector<std::string> non_root_entries(const fs::path& tree) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(tree / "usr", ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    if (st.st_uid != 0 || st.st_gid != 0) {
      found.push_back(std::to_string(st.st_uid) + ":" + std::to_string(st.st_gid) + " /" +
                      fs::relative(it->path(), tree).string());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

class CapsuledRecipes : public Capsuled {
 protected:
  static void SetUpTestSuite() {
    recipes_ = find_recipes(recipe_root());
    if (recipes_.empty()) return;
    char pattern[] = "/tmp/capsuled-recipes-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) {
      ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
      return;
    }
    shared_ = pattern;
    ::chmod(shared_.c_str(), 0711);  // sandboxes run as unprivileged ids and walk through it to the layers
  }

  static void TearDownTestSuite() {
    if (!shared_.empty() && mounts_below(shared_).empty()) {
      const auto start = Clock::now();
      std::error_code ignored;
      fs::remove_all(shared_, ignored);
      note("removed the shared image store in " + std::to_string(seconds_since(start)) + " s");
    }
    shared_.clear();
    recipes_.clear();
  }

  void SetUp() override {
    Capsuled::SetUp();
    if (HasFatalFailure()) return;
    if (recipe_root().empty()) GTEST_SKIP() << "CAPSULE_RECIPE_DIR is not set; " << kHowToBuild;
    // Asked to test recipe outputs that are not there: a failed or misdirected build, not a reason to skip.
    ASSERT_FALSE(recipes_.empty()) << "CAPSULE_RECIPE_DIR=" << recipe_root()
                                   << " holds no recipe outputs (<name>/labels.json with rootfs.tar.gz or rootfs/); "
                                   << kHowToBuild;
    ASSERT_FALSE(shared_.empty());
    state_ = shared_ / "state";  // the shared image store; the ledger and cgroups follow the state dir
    parent_ = daemon::cgroup_parent_for(state_.string());
    start();
  }

  void TearDown() override {
    Capsuled::TearDown();
    if (!shared_.empty()) {
      for (const auto& mount : mounts_below(shared_)) ADD_FAILURE() << "mount left in the shared state dir: " << mount;
    }
  }

  // The recipe outputs (not layers) providing every toolchain in `tools`, by directory name.
  static std::vector<const Recipe*> image_recipes(std::initializer_list<const char*> tools) {
    std::vector<const Recipe*> found;
    for (const Recipe& recipe : recipes_) {
      if (recipe.is_layer()) continue;
      if (std::all_of(tools.begin(), tools.end(), [&](const char* tool) { return !recipe.toolchain(tool).empty(); })) {
        found.push_back(&recipe);
      }
    }
    return found;
  }
  // The JDK + Maven image whose java is `java_major` (jdk-maven.sh --jdk N), or nullptr.
  static const Recipe* jdk_recipe(const std::string& java_major) {
    for (const Recipe* recipe : image_recipes({"java", "maven"})) {
      if (major(recipe->toolchain("java")) == java_major) return recipe;
    }
    return nullptr;
  }
  // The python image with or without Debian's pytest (python3.sh, python3.sh --without-test-tools), or nullptr.
  static const Recipe* python_recipe(bool with_pytest) {
    for (const Recipe* recipe : image_recipes({"python", "pip"})) {
      if (recipe->toolchain("pytest").empty() != with_pytest) return recipe;
    }
    return nullptr;
  }
  static std::vector<const Recipe*> layer_recipes() {
    std::vector<const Recipe*> layers;
    for (const Recipe& recipe : recipes_) {
      if (recipe.is_layer()) layers.push_back(&recipe);
    }
    return layers;
  }

  // The image of `recipe` in the store: imported now (rootfs format, `labels` or else labels.json as labels) unless
  // it already is.
  json ensure_image(const Recipe& recipe, const json& labels = nullptr) {
    const HttpResponse existing = call("GET", "/v1/images/" + http::url_encode(recipe.ref()));
    if (existing.status == 200) return body_json(existing);
    const json body = {{"source", recipe.source.string()}, {"format", "rootfs"}, {"ref", recipe.ref()},
                       {"labels", labels.is_null() ? recipe.labels : labels}};
    const auto start = Clock::now();
    const HttpResponse response = call("POST", "/v1/images", body);
    EXPECT_EQ(response.status, 201) << "import of " << recipe.source << ": " << response.body;
    const json image = body_json(response);
    std::ostringstream text;
    text << "imported " << recipe.name << " from " << recipe.source;
    if (fs::is_regular_file(recipe.source)) text << " (" << megabytes(recipe.source) << ")";
    text << " in " << seconds_since(start) << " s -> " << image.value("digest", "?");
    note(text.str());
    return image;
  }

  std::string logs(const json& run, const std::string& stream) const {
    return call("GET", "/v1/runs/" + run.value("id", std::string()) + "/logs?stream=" + stream).body;
  }
  // What a failure message needs: state, reason, exit code and the ends of both streams.
  static std::string describe(const json& run) {
    const bool has_record = run.is_object() && run.contains("result") && run["result"].is_object();
    const json record = has_record ? run["result"] : json::object();
    std::ostringstream out;
    out << "state " << run.value("state", "?") << ", reason '" << record.value("reason", "") << "', exit "
        << record.value("exit_code", json()).dump() << "\n--- stdout tail:\n"
        << (record.contains("stdout") ? record["stdout"].value("tail", "") : "") << "\n--- stderr tail:\n"
        << (record.contains("stderr") ? record["stderr"].value("tail", "") : "");
    return out.str();
  }

  // A run in `image` (ref) with a 2 minute limit; `extra` overrides spec fields.
  json run_in(const std::string& image, const std::vector<std::string>& argv, const json& extra = json::object()) {
    json spec = {{"image", image}, {"argv", argv}, {"limits", {{"wall_time", "2m"}}}};
    spec.update(extra);
    const auto start = Clock::now();
    json run = run_and_wait(spec);
    std::string shown;
    for (const auto& arg : argv) shown += (shown.empty() ? "" : " ") + arg;
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    const bool has_record = run.is_object() && run.contains("result") && run["result"].is_object();
    const int wall_ms = has_record ? run["result"].value("wall_ms", 0) : -1;
    note("ran '" + shown + "' in " + image + ": " + run.value("state", "?") + ", " + std::to_string(wall_ms) +
         " ms in the sandbox, " +
         std::to_string(static_cast<int>(seconds_since(start) * 1000)) + " ms for the request");
    return run;
  }

  // `script` (sh -c) in `image` on a cow copy of `workspace`, without network, collecting `collect`.
  json run_on_copy(const std::string& image, const fs::path& workspace, const std::string& script,
                   const json& collect, const json& limits = {{"wall_time", "10m"}, {"memory", "2g"}}) {
    return run_in(image, {"/bin/sh", "-c", script},
                  {{"workspace", {{"path", workspace.string()}, {"mode", "cow"}}},
                   {"collect", collect},
                   {"limits", limits},
                   {"network", "none"}});
  }

  // Inside `image`: runs as root, `paths` (and what symlinks among them point to) are 0:0, and every entry of
  // /usr not owned by 0:0 is owned as in the recipe's tree (no unmapped 65534 anywhere).
  void expect_root_owned(const Recipe& recipe, const std::vector<std::string>& paths) {
    std::string script = "id -u; id -g; stat -c '%u:%g %n'";
    for (const auto& path : paths) script += " " + path;
    script += "; stat -L -c '%u:%g %n'";
    for (const auto& path : paths) script += " " + path;
    script += "; echo ---; find /usr \\( ! -uid 0 -o ! -gid 0 \\) -printf '%U:%G %p\\n' | LC_ALL=C sort";
    const json run = run_in(recipe.ref(), {"/bin/sh", "-c", script});
    ASSERT_EQ(run.value("state", ""), "succeeded") << describe(run);
    const std::vector<std::string> lines = lines_of(logs(run, "stdout"));
    ASSERT_GE(lines.size(), 2 + 2 * paths.size() + 1) << logs(run, "stdout");
    EXPECT_EQ(lines[0], "0") << "uid inside";
    EXPECT_EQ(lines[1], "0") << "gid inside";
    for (std::size_t i = 0; i < 2 * paths.size(); ++i) {
      EXPECT_EQ(lines[2 + i], "0:0 " + paths[i % paths.size()]) << (i < paths.size() ? "stat" : "stat -L");
    }
    ASSERT_EQ(lines[2 + 2 * paths.size()], "---");
    const std::vector<std::string> inside(lines.begin() + static_cast<std::ptrdiff_t>(3 + 2 * paths.size()),
                                          lines.end());
    for (const auto& line : inside) {
      EXPECT_TRUE(line.starts_with("0:")) << "not owned by root inside: " << line;
      EXPECT_EQ(line.find("65534"), std::string::npos) << "an unmapped owner inside: " << line;
    }
    if (!recipe.tree.empty()) {
      EXPECT_EQ(inside, non_root_entries(recipe.tree)) << "owners inside differ from " << recipe.tree;
    }
  }

  // java, javac and mvn of one JDK image: the versions its labels name, Maven on that JDK, root-owned files.
  void check_jdk_image(const Recipe& jdk) {
    const json image = ensure_image(jdk);
    ASSERT_FALSE(HasFailure());
    const std::string java = jdk.toolchain("java"), maven = jdk.toolchain("maven");

    const json java_run = run_in(jdk.ref(), {"java", "-version"});
    ASSERT_EQ(java_run.value("state", ""), "succeeded") << describe(java_run);
    EXPECT_EQ(java_run["pinned"]["image_digests"], json::array({image["digest"]}));
    const std::string java_says = logs(java_run, "stderr");
    EXPECT_NE(java_says.find("version \"" + java + "\""), std::string::npos) << java_says;

    const json javac_run = run_in(jdk.ref(), {"javac", "-version"});
    ASSERT_EQ(javac_run.value("state", ""), "succeeded") << describe(javac_run);
    const std::string javac_says = logs(javac_run, "stdout") + logs(javac_run, "stderr");
    EXPECT_NE(javac_says.find("javac " + major(java)), std::string::npos) << javac_says;

    const json mvn_run = run_in(jdk.ref(), {"mvn", "-v"});
    ASSERT_EQ(mvn_run.value("state", ""), "succeeded") << describe(mvn_run);
    const std::string mvn_says = strip_ansi(logs(mvn_run, "stdout"));
    const std::vector<std::string> mvn_lines = lines_of(mvn_says);  // "Apache Maven 3.8.7" (+ " (<commit>)" upstream)
    ASSERT_FALSE(mvn_lines.empty());
    EXPECT_TRUE(mvn_lines[0] == "Apache Maven " + maven || mvn_lines[0].starts_with("Apache Maven " + maven + " "))
        << mvn_says;
    EXPECT_NE(mvn_says.find("Java version: " + java + ","), std::string::npos)
        << "Maven runs on the image's JDK: " << mvn_says;

    expect_root_owned(jdk, {"/usr/bin/java", "/usr/bin/mvn", "/usr/share/maven/bin/mvn", "/usr/share/maven-repo",
                            "/root/.m2/settings.xml"});
  }

  static inline std::vector<Recipe> recipes_;
  static inline fs::path shared_;
};

}  // namespace capsule::testing
