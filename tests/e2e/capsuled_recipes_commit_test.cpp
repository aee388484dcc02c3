// Two-phase runs in the recipe images: a venv that one run builds with real pip is committed as an image and used
// by the next run with no network at all, the way a harness installs first and then tests in a frozen environment.
// Part of the CapsuledRecipes suite (recipes_fixture.h).
#include <string>

#include "tests/e2e/recipes_fixture.h"

namespace capsule::testing {
namespace {

// A pure-Python wheel `demo-1.0` (module demo, VERSION = "1.0") written into `dir` with the host's zipfile.
void write_demo_wheel(const fs::path& dir) {
  const std::string script = R"(
import base64, hashlib, sys, zipfile
files = {
  "demo/__init__.py": 'VERSION = "1.0"\n',
  "demo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
  "demo-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: capsule-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(sys.argv[1] + "/demo-1.0-py3-none-any.whl", "w") as wheel:
    for name, text in files.items():
        data = text.encode()
        wheel.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("demo-1.0.dist-info/RECORD,,")
    wheel.writestr("demo-1.0.dist-info/RECORD", "\n".join(record) + "\n")
)";
  write_file(dir / "make_wheel.py", script);
  ASSERT_EQ(std::system(("python3 " + (dir / "make_wheel.py").string() + " " + dir.string()).c_str()), 0);
  fs::remove(dir / "make_wheel.py");
}

TEST_F(CapsuledRecipes, AVenvBuiltByOneRunIsCommittedAndUsedOfflineByTheNext) {
  const Recipe* python = python_recipe(false);  // python3-base: pip and venv, nothing of the project's
  if (python == nullptr) python = python_recipe(true);
  if (python == nullptr) GTEST_SKIP() << "no python image in " << recipe_root() << "; " << kHowToBuild;
  const json base = ensure_image(*python);
  ASSERT_FALSE(HasFailure());
  const fs::path wheels = make_dir("wheels");
  write_demo_wheel(wheels);
  ASSERT_FALSE(HasFailure());

  // Phase one: a venv in /opt, its package installed by the image's real pip from the workspace (no index).
  const json install = run_in(python->ref(),
                              {"/bin/sh", "-ec",
                               "python3 -m venv /opt/venv && /opt/venv/bin/pip install -q --no-index "
                               "--find-links /workspace demo && /opt/venv/bin/python -c 'import demo'"},
                              {{"workspace", {{"path", wheels.string()}, {"mode", "ro"}}},
                               {"network", "none"},
                               {"limits", {{"wall_time", "5m"}}}});
  ASSERT_EQ(install.value("state", ""), "succeeded") << describe(install) << logs(install, "stderr");
  ASSERT_TRUE(install["outputs"]["root"].is_object()) << install["outputs"];

  const HttpResponse committed =
      call("POST", "/v1/runs/" + install["id"].get<std::string>() + "/commit", {{"ref", "test/venv-committed:1"}});
  ASSERT_EQ(committed.status, 201) << committed.body;
  const json image = body_json(committed);
  EXPECT_EQ(image["config"]["labels"].value("org.capsule.committed.from_run", ""), install["id"]) << image;

  // Phase two: the committed image, no workspace, no network: the venv and its package are there.
  const json test = run_in("test/venv-committed:1",
                           {"/opt/venv/bin/python", "-c", "import demo, sys; print(demo.VERSION, sys.prefix)"},
                           {{"network", "none"}});
  ASSERT_EQ(test.value("state", ""), "succeeded") << describe(test) << logs(test, "stderr");
  EXPECT_EQ(logs(test, "stdout"), "1.0 /opt/venv\n");
  EXPECT_EQ(test["pinned"]["image_digests"], json::array({image["digest"]})) << test["pinned"];

  // The base image is as it was: the venv lives only in the committed one.
  const json plain = run_in(python->ref(), {"/bin/sh", "-c", "test -e /opt/venv && echo present || echo absent"});
  EXPECT_EQ(logs(plain, "stdout"), "absent\n");
  EXPECT_EQ(body_json(call("GET", "/v1/images/" + http::url_encode(python->ref())))["digest"], base["digest"]);

  // The committed image has its base's toolchain labels, yet a toolchains request never picks it: only its ref does.
  const json resolved =
      body_json(call("GET", "/v1/toolchains/resolve?python=" + major_minor(python->toolchain("python"))));
  EXPECT_NE(resolved["image"].value("ref", ""), "test/venv-committed:1") << resolved;
  EXPECT_EQ(call("DELETE", "/v1/images/" + http::url_encode("test/venv-committed:1")).status, 200);
}

}  // namespace
}  // namespace capsule::testing
