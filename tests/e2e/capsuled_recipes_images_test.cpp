// What the toolchain images carry besides their compilers (issue 35): git and patch in the JDK images, a JaCoCo
// agent that instruments the classes each image's javac writes (sealed types, --release 17 and 21), and the shared
// libraries a pyenv layer's stdlib loads (tkinter's Tcl/Tk) on its base. Part of the CapsuledRecipes suite.
#include <string>

#include "tests/e2e/recipes_fixture.h"

namespace capsule::testing {
namespace {

// Sealed types and records compiled --release 17 (and a pattern switch over them at 21): the class files JaCoCo
// before 0.8.7 skipped. Main prints each shape's area and kind.
constexpr const char* kSealedShape = R"(package demo;
public sealed interface Shape permits Circle, Square {
  default String kind() { return getClass().getSimpleName(); }
}
)";
constexpr const char* kCircle = "package demo;\npublic record Circle(double r) implements Shape {}\n";
constexpr const char* kSquare = "package demo;\npublic record Square(double side) implements Shape {}\n";
constexpr const char* kMainRelease17 = R"(package demo;
public final class Main {
  static double area(Shape s) {
    if (s instanceof Circle c) return 3 * c.r() * c.r();
    return ((Square) s).side() * ((Square) s).side();
  }
  public static void main(String[] args) {
    for (Shape s : new Shape[] { new Circle(1), new Square(2) }) System.out.println(area(s) + " " + s.kind());
  }
}
)";
constexpr const char* kMainRelease21 = R"(package demo;
public final class Main {
  static double area(Shape s) {
    return switch (s) {
      case Circle c -> 3 * c.r() * c.r();
      case Square q -> q.side() * q.side();
    };
  }
  public static void main(String[] args) {
    for (Shape s : new Shape[] { new Circle(1), new Square(2) }) System.out.println(area(s) + " " + s.kind());
  }
}
)";
// JaCoCo's own analyzer (org.jacoco.core, what its report tasks use) over the agent's exec file: "<class>
// <covered lines>/<lines>" per class.
constexpr const char* kCoveredLines = R"(import java.io.File;
import org.jacoco.core.analysis.Analyzer;
import org.jacoco.core.analysis.CoverageBuilder;
import org.jacoco.core.analysis.IClassCoverage;
import org.jacoco.core.tools.ExecFileLoader;
public class CoveredLines {
  public static void main(String[] args) throws Exception {
    ExecFileLoader exec = new ExecFileLoader();
    exec.load(new File(args[0]));
    CoverageBuilder coverage = new CoverageBuilder();
    new Analyzer(exec.getExecutionDataStore(), coverage).analyzeAll(new File(args[1]));
    for (IClassCoverage c : coverage.getClasses())
      System.out.println(c.getName() + " " + c.getLineCounter().getCoveredCount() + "/" + c.getLineCounter().getTotalCount());
  }
}
)";

TEST_F(CapsuledRecipes, JdkImagesApplyAPatchWithGitAndPatch) {
  const std::vector<const Recipe*> jdks = image_recipes({"java", "maven"});
  if (jdks.empty()) GTEST_SKIP() << "no jdk*-maven output in " << recipe_root() << "; " << kHowToBuild;
  const fs::path workspace = make_dir("patch-workspace");
  fs::create_directories(workspace / "src");
  write_file(workspace / "src/Greeting.java", "class Greeting {\n  String text() { return \"hello\"; }\n}\n");
  write_file(workspace / "change.patch", R"(--- a/src/Greeting.java
+++ b/src/Greeting.java
@@ -1,3 +1,3 @@
 class Greeting {
-  String text() { return "hello"; }
+  String text() { return "hello, patched"; }
 }
)");
  // patch applies it; git (as `git apply`, in a repository of the result) then sees it applied: it reverses.
  const std::string script =
      "patch -s -p1 < change.patch && grep -c 'hello, patched' src/Greeting.java && "
      "git init -q . && git apply -R --check change.patch && echo git-sees-it-applied && "
      "git --version && patch --version | head -n1";
  for (const Recipe* jdk : jdks) {
    SCOPED_TRACE(jdk->name);
    ensure_image(*jdk);
    ASSERT_FALSE(HasFailure());
    const json run = run_on_copy(jdk->ref(), workspace, script, json::object(), {{"wall_time", "2m"}});
    const std::string out = logs(run, "stdout");
    ASSERT_EQ(run.value("state", ""), "succeeded") << describe(run) << logs(run, "stderr");
    const std::vector<std::string> lines = lines_of(out);
    ASSERT_EQ(lines.size(), 4u) << out;
    EXPECT_EQ(lines[0], "1") << out;
    EXPECT_EQ(lines[1], "git-sees-it-applied") << out;
    EXPECT_TRUE(lines[2].starts_with("git version ")) << out;
    EXPECT_TRUE(lines[3].starts_with("GNU patch ")) << out;
  }
}

// In jdk17-maven (--release 17) and jdk21-maven (--release 21): the agent at /usr/local/share/jacoco writes a
// non-empty exec file for a program of sealed types and records, and JaCoCo's analyzer (with the image's ASM) finds
// covered lines in every one of those classes - Debian bookworm's JaCoCo 0.8.6 left them out.
TEST_F(CapsuledRecipes, JacocoCoversSealedClassesOfEachJdkRelease) {
  int tested = 0;
  for (const std::string release : {"17", "21"}) {
    const Recipe* jdk = jdk_recipe(release);
    if (jdk == nullptr) continue;
    SCOPED_TRACE(jdk->name);
    ++tested;
    ensure_image(*jdk);
    ASSERT_FALSE(HasFailure());
    const fs::path workspace = make_dir("jacoco-sealed-" + release);
    fs::create_directories(workspace / "src/demo");
    write_file(workspace / "src/demo/Shape.java", kSealedShape);
    write_file(workspace / "src/demo/Circle.java", kCircle);
    write_file(workspace / "src/demo/Square.java", kSquare);
    write_file(workspace / "src/demo/Main.java", release == "21" ? kMainRelease21 : kMainRelease17);
    write_file(workspace / "CoveredLines.java", kCoveredLines);
    std::string script = "set -e; javac --release ";
    script += release;
    script +=
        " -d classes src/demo/*.java\n"
        "java -javaagent:/usr/local/share/jacoco/jacocoagent.jar=destfile=jacoco.exec -cp classes demo.Main\n"
        "echo exec-bytes $(wc -c < jacoco.exec)\n"
        "java -cp /usr/share/java/org.jacoco.core.jar:/usr/share/java/asm.jar:/usr/share/java/asm-commons.jar:"
        "/usr/share/java/asm-tree.jar CoveredLines.java jacoco.exec classes | LC_ALL=C sort\n";
    const json run = run_on_copy(jdk->ref(), workspace, script, json::object(), {{"wall_time", "2m"}, {"memory", "2g"}});
    const std::string out = logs(run, "stdout");
    ASSERT_EQ(run.value("state", ""), "succeeded") << describe(run) << logs(run, "stderr");
    const std::vector<std::string> lines = lines_of(out);
    ASSERT_EQ(lines.size(), 7u) << out;
    EXPECT_EQ(lines[0], "3.0 Circle");
    EXPECT_EQ(lines[1], "4.0 Square");
    std::smatch bytes;
    ASSERT_TRUE(std::regex_match(lines[2], bytes, std::regex("exec-bytes ([0-9]+)"))) << out;
    EXPECT_GT(std::stoi(bytes[1]), 0) << "an empty jacoco.exec";
    // Every class has covered lines; Main's `((Square) s)` line (17) or the switch's default (21) may differ.
    const std::vector<std::string> classes = {"demo/Circle", "demo/Main", "demo/Shape", "demo/Square"};
    for (std::size_t i = 0; i < classes.size(); ++i) {
      std::smatch counted;
      ASSERT_TRUE(std::regex_match(lines[3 + i], counted, std::regex("(\\S+) ([0-9]+)/([0-9]+)"))) << out;
      EXPECT_EQ(counted[1], classes[i]) << out;
      EXPECT_GT(std::stoi(counted[2]), 0) << "no covered line in " << classes[i] << ":\n" << out;
    }
    note(jdk->name + ": JaCoCo covered sealed classes (--release " + release + "), " + bytes[1].str() +
         " bytes of exec data");
  }
  if (tested == 0) GTEST_SKIP() << "no jdk17-maven or jdk21-maven output in " << recipe_root() << "; " << kHowToBuild;
}

// A python layer (pyenv's CPython) stacked on its base: every stdlib extension module the issue names imports, and
// tkinter's Tcl evaluates - the layer carries libtcl/libtk and Tcl's script library, which the base lacks.
TEST_F(CapsuledRecipes, PythonLayersLoadTheirStdlibExtensionsAndTcl) {
  int tested = 0;
  for (const Recipe* layer : layer_recipes()) {
    if (layer->toolchain("python").empty()) continue;
    SCOPED_TRACE(layer->name);
    const std::string base_ref = layer->labels.value(kLayerBaseLabel, "");
    const auto base = std::find_if(recipes_.begin(), recipes_.end(),
                                   [&](const Recipe& recipe) { return !recipe.is_layer() && recipe.ref() == base_ref; });
    ASSERT_NE(base, recipes_.end()) << "no recipe output in " << recipe_root() << " is imported as " << base_ref;
    ++tested;
    ensure_image(*base);
    ensure_image(*layer);
    ASSERT_FALSE(HasFailure());
    const json run = run_in(
        base->ref(),
        {"python3", "-c",
         "import _ssl, _sqlite3, _ctypes, _lzma, _bz2, readline, _curses, _uuid, zlib, _tkinter, tkinter\n"
         "print(tkinter.Tcl().eval('info patchlevel'))"},
        {{"layers", {layer->ref()}}});
    ASSERT_EQ(run.value("state", ""), "succeeded") << describe(run) << logs(run, "stderr");
    const std::string out = logs(run, "stdout");
    EXPECT_TRUE(std::regex_match(out, std::regex("8\\.[0-9]+\\.[0-9]+\n"))) << "Tcl's patchlevel: " << out;
  }
  if (tested == 0) GTEST_SKIP() << "no python toolchain layer in " << recipe_root() << "; " << kHowToBuild;
}

}  // namespace
}  // namespace capsule::testing
