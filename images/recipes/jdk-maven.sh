#!/bin/bash
# Toolchain image: Debian's OpenJDK 11, 17 or 21 + Debian's Maven set up for offline `mvn -B clean verify` with
# Debian's packaged plugins (see /work/shared/reference/maven-offline-debian.sh). Labels java, maven.
# usage: jdk-maven.sh --jdk 11|17|21 [--out DIR] [--tar-only] [--if-changed]   (root; see README.md)
#   11: Debian bullseye (Maven 3.6.3), 17: bookworm (Maven 3.8.7), 21: trixie (Maven 3.9.9); the image is
#   jdk<N>-maven. The suite comes from the host's mirror whatever the host runs.
# shellcheck disable=SC2034  # RECIPE_NAME, RECIPE_SUITE and RECIPE_PACKAGES are read by lib.sh
jdk="" args=()
while [ $# -gt 0 ]; do
  case $1 in
    --jdk) jdk=${2:-}; shift 2 || shift ;;
    --jdk=*) jdk=${1#--jdk=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
case $jdk in
  11) RECIPE_SUITE=bullseye ;;
  17) RECIPE_SUITE=bookworm ;;
  21) RECIPE_SUITE=trixie ;;
  *) echo "usage: $0 --jdk 11|17|21 [--out DIR] [--tar-only] [--if-changed]" >&2; exit 2 ;;
esac
RECIPE_NAME=jdk$jdk-maven
# Maven, the lifecycle plugins (clean, resources, compiler, surefire, jar, install, deploy), the usual extra
# plugins (source, javadoc, antrun, bundle), test frameworks and JaCoCo; python3 writes the plugin metadata
# at build time (as in the reference); git and patch for agents that apply patches to a workspace. The package
# names are the same in the three suites.
RECIPE_PACKAGES="openjdk-$jdk-jdk-headless maven
  libmaven-clean-plugin-java libmaven-resources-plugin-java libmaven-compiler-plugin-java libsurefire-java
  libmaven-jar-plugin-java libmaven-install-plugin-java libmaven-deploy-plugin-java libmaven-source-plugin-java
  libmaven-javadoc-plugin-java libmaven-antrun-plugin-java libmaven-bundle-plugin-java
  junit4 junit5 libmockito-java libjacoco-java python3 git patch"
# JaCoCo must instrument the classes this JDK compiles: bookworm's 0.8.6 silently skips JDK 17 classes with
# PermittedSubclasses (sealed types), so the JDK 17 image takes trixie's libjacoco-java (0.8.12, Java 21
# support) and the libasm-java it needs; trixie's own is that version. JaCoCo 0.8.6 handles JDK 11's classes.
JACOCO_MIN=0.8.12
case $jdk in
  17) JACOCO_SUITE=trixie ;;
  *) JACOCO_SUITE="" ;;
esac

M2=/root/.m2   # HOME=/root in capsule sandboxes

# Installs libjacoco-java and libasm-java from JACOCO_SUITE with apt, which checks them against that suite's signed
# Release and Packages files like any other package; the suite is pinned to priority 1, so nothing else (no other
# dependency) can come from it. The extra source is removed again: the image's apt sees only its own suite.
jacoco_from_newer_suite() {
  local mirror list=/etc/apt/sources.list.d/capsule-jacoco.list pin=/etc/apt/preferences.d/capsule-jacoco
  mirror=$(CAPSULE_DEBIAN_SUITE=$JACOCO_SUITE debian_mirror)
  log "JaCoCo from $JACOCO_SUITE ($mirror)"
  echo "deb $mirror $JACOCO_SUITE main" > "$ROOT$list"
  printf 'Package: *\nPin: release n=%s\nPin-Priority: 1\n' "$JACOCO_SUITE" > "$ROOT$pin"
  in_root apt-get update -qq >> "$WORK/apt.log" 2>&1 ||
    { tail -n 30 "$WORK/apt.log" >&2; die "apt-get update ($JACOCO_SUITE) failed"; }
  RECIPE_APT_CACHE=${CACHE:+$CACHE/apt} with_cache_lock apt in_root apt-get install -y -q --no-install-recommends \
    "libjacoco-java/$JACOCO_SUITE" "libasm-java/$JACOCO_SUITE" >> "$WORK/apt.log" 2>&1 ||
    { tail -n 30 "$WORK/apt.log" >&2; die "apt-get install libjacoco-java/$JACOCO_SUITE failed"; }
  rm -f "$ROOT$list" "$ROOT$pin"
}

surefire_blocking_feeder() {
  local jar class=org/apache/maven/surefire/shade/org/apache/maven/shared/utils/cli/StreamPollFeeder.class
  jar=$(in_root /bin/sh -c 'readlink -f /usr/share/java/maven-surefire-common.jar')
  in_root python3 -c 'import sys, zipfile; sys.exit(sys.argv[2] not in zipfile.ZipFile(sys.argv[1]).namelist())' \
    "$jar" "$class" || return 0
  log "surefire: $(basename "$jar") shades the polling StreamPollFeeder; the Maven repository gets a blocking one"
  mkdir -p "$ROOT/var/tmp/surefire-feeder/classes"
  cp "$(dirname "$0")/surefire/StreamPollFeeder.java" "$ROOT/var/tmp/surefire-feeder/"
  cp "$ROOT$jar" "$ROOT/var/tmp/surefire-feeder/surefire-common.jar"
  in_root /bin/sh -ec 'cd /var/tmp/surefire-feeder && javac -Xlint:-options --release 8 -d classes StreamPollFeeder.java &&
    cd classes && jar uf ../surefire-common.jar '"$class" || die "could not build the blocking StreamPollFeeder"
  local version dir
  for version in "$(basename "$jar" .jar | sed 's/^maven-surefire-common-//')" debian; do
    dir=$ROOT$M2/repository/org/apache/maven/surefire/maven-surefire-common/$version
    [ -d "$dir" ] || continue
    rm -f "$dir/maven-surefire-common-$version.jar"
    cp "$ROOT/var/tmp/surefire-feeder/surefire-common.jar" "$dir/maven-surefire-common-$version.jar"
  done
  rm -rf "$ROOT/var/tmp/surefire-feeder"
}

recipe_setup() {
  # 0. A JaCoCo that instruments this JDK's class files (before the repository farm below links its jars).
  [ -z "$JACOCO_SUITE" ] || jacoco_from_newer_suite
  local jacoco
  jacoco=$(dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f '${Version}' libjacoco-java)
  if [ "$jdk" != 11 ] && dpkg --compare-versions "$jacoco" lt "$JACOCO_MIN"; then
    die "libjacoco-java $jacoco is older than $JACOCO_MIN, which JDK $jdk's class files need"
  fi

  # 1. Writable local repository = symlink farm of /usr/share/maven-repo at Maven's default location, so it is
  #    used even when a run brings its own settings.xml. (Written to by a run only in its overlay upper.)
  in_root /bin/sh -ec "mkdir -p $M2/repository && cp -rsn /usr/share/maven-repo/. $M2/repository/"

  # 2. Maven before 3.9 injects plexus-utils:1.1 into plugins whose dependencies lack plexus-utils (e.g. Debian's
  #    maven-clean-plugin 3.2.0); Debian does not ship 1.1, so serve it from the packaged plexus-utils2.
  local maven d
  maven=$(dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f '${Version}' maven)
  if dpkg --compare-versions "$maven" lt 3.9; then
    d=$ROOT$M2/repository/org/codehaus/plexus/plexus-utils/1.1
    [ -f "$ROOT/usr/share/java/plexus-utils2.jar" ] || die "plexus-utils2.jar missing from the image"
    mkdir -p "$d"
    cp -f "$ROOT/usr/share/java/plexus-utils2.jar" "$d/plexus-utils-1.1.jar"
    cat > "$d/plexus-utils-1.1.pom" <<'EOF'
<project>
  <modelVersion>4.0.0</modelVersion>
  <groupId>org.codehaus.plexus</groupId>
  <artifactId>plexus-utils</artifactId>
  <version>1.1</version>
  <packaging>jar</packaging>
</project>
EOF
  fi

  # 3. maven-metadata-local.xml for every packaged plugin (versions, and goal prefixes per group), so that
  #    version-less plugin declarations and `mvn <prefix>:<goal>` resolve offline. Runs inside the image so
  #    the farm's absolute symlinks resolve there.
  in_root python3 - "$M2/repository" <<'EOF' >&2
import os, re, sys, zipfile
from collections import defaultdict

repo = sys.argv[1]
prefixes = defaultdict(dict)     # group -> {artifact: goalPrefix}
versions = defaultdict(set)      # (group, artifact) -> {version}

def version_key(v):
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.-]", v)]

for root, _dirs, files in os.walk(repo, followlinks=True):
    for name in files:
        if not name.endswith(".jar"):
            continue
        vdir = root
        adir = os.path.dirname(vdir)
        version, artifact = os.path.basename(vdir), os.path.basename(adir)
        if name != "%s-%s.jar" % (artifact, version):
            continue
        try:
            with zipfile.ZipFile(os.path.join(vdir, name)) as jar:
                descriptor = jar.read("META-INF/maven/plugin.xml").decode("utf-8", "replace")
        except Exception:
            continue  # not a plugin (or unreadable)
        group = re.search(r"<groupId>([^<]+)</groupId>", descriptor)
        prefix = re.search(r"<goalPrefix>([^<]+)</goalPrefix>", descriptor)
        if not group:
            continue
        group = group.group(1).strip()
        if os.path.relpath(os.path.dirname(adir), repo).replace(os.sep, ".") != group:
            continue
        if prefix:
            prefixes[group][artifact] = prefix.group(1).strip()
        if version != "debian" and not version.endswith(".x"):
            versions[(group, artifact)].add(version)

for (group, artifact), vs in versions.items():
    vs = sorted(vs, key=version_key)
    listed = "".join("      <version>%s</version>\n" % v for v in vs)
    with open(os.path.join(repo, *group.split("."), artifact, "maven-metadata-local.xml"), "w") as out:
        out.write("<metadata>\n  <groupId>%s</groupId>\n  <artifactId>%s</artifactId>\n  <versioning>\n"
                  "    <latest>%s</latest>\n    <release>%s</release>\n    <versions>\n%s    </versions>\n"
                  "  </versioning>\n</metadata>\n" % (group, artifact, vs[-1], vs[-1], listed))
for group, arts in prefixes.items():
    plugins = "".join("    <plugin>\n      <prefix>%s</prefix>\n      <artifactId>%s</artifactId>\n    </plugin>\n"
                      % (p, a) for a, p in sorted(arts.items()))
    with open(os.path.join(repo, *group.split("."), "maven-metadata-local.xml"), "w") as out:
        out.write("<metadata>\n  <plugins>\n%s  </plugins>\n</metadata>\n" % plugins)
print("plugin metadata: %d groups, %d plugin artifacts" % (len(prefixes), len(versions)))
EOF

  # 4. Settings: the farm as local repository, offline (no remote is ever contacted).
  cat > "$ROOT$M2/settings.xml" <<EOF
<settings>
  <localRepository>$M2/repository</localRepository>
  <offline>true</offline>
</settings>
EOF

  # 5. Where surefire shades maven-shared-utils' polling stdin feeder (trixie: 2.22.3 built against 3.4.2), its
  #    commands never reach the fork, which waits out its 30 s exit timeout and is halted before the JaCoCo agent
  #    writes (images/recipes/surefire/StreamPollFeeder.java says why): the farm's surefire-common becomes a copy
  #    with a blocking feeder. Debian's own jar, which dpkg owns, stays as it is.
  surefire_blocking_feeder

  # 6. JaCoCo has no Maven plugin in Debian: extract the runtime agent for surefire's argLine
  #    (-javaagent:/usr/local/share/jacoco/jacocoagent.jar=destfile=...) and use org.jacoco.ant for reports.
  [ -f "$ROOT/usr/share/java/org.jacoco.agent.jar" ] || die "org.jacoco.agent.jar missing from the image"
  mkdir -p "$ROOT/usr/local/share/jacoco"
  in_root python3 -c 'import sys, zipfile
sys.stdout.buffer.write(zipfile.ZipFile("/usr/share/java/org.jacoco.agent.jar").read("jacocoagent.jar"))' \
    > "$ROOT/usr/local/share/jacoco/jacocoagent.jar"
}

# A JUnit 4 and a JUnit 5 project (the versions the suite packages) built with a plain `mvn -B clean verify`,
# without network; the JUnit 5 one runs its tests under the JaCoCo agent (surefire's argLine), whose coverage data
# _jacoco_check reads in the same scratch.
_demo_projects() {
  cat <<'OUTER'
set -e
packaged() {  # the version of a group/artifact path in Debian's repository (not the debian or N.x aliases)
  ls "/usr/share/maven-repo/$1" | grep -E '^[0-9][0-9.]*$' | sort -V | tail -n1
}
mk() {  # dir junit-group junit-artifact junit-version test-source [surefire-argLine]
  mkdir -p "$1/src/main/java/demo" "$1/src/main/resources" "$1/src/test/java/demo"
  cat > "$1/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId>
  <artifactId>$(basename "$1")</artifactId>
  <version>1.0-SNAPSHOT</version>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <maven.compiler.source>8</maven.compiler.source>
    <maven.compiler.target>8</maven.compiler.target>
  </properties>
  <dependencies>
    <dependency><groupId>$2</groupId><artifactId>$3</artifactId><version>$4</version><scope>test</scope></dependency>
  </dependencies>
  <build><plugins><plugin>
    <artifactId>maven-surefire-plugin</artifactId>
    <configuration><argLine>${6:-}</argLine></configuration>
  </plugin></plugins></build>
</project>
EOF
  printf 'package demo;\npublic final class Calc {\n  public static int add(int a, int b) { return a + b; }\n  public static String greeting() throws java.io.IOException {\n    java.util.Properties p = new java.util.Properties();\n    try (java.io.InputStream in = Calc.class.getResourceAsStream("/demo.properties")) { p.load(in); }\n    return p.getProperty("greeting");\n  }\n}\n' > "$1/src/main/java/demo/Calc.java"
  echo greeting=hello > "$1/src/main/resources/demo.properties"
  printf '%s\n' "$5" > "$1/src/test/java/demo/CalcTest.java"
}
mk /tmp/junit4-demo junit junit "$(packaged junit/junit)" 'package demo;
import static org.junit.Assert.assertEquals;
import org.junit.Test;
public class CalcTest {
  @Test public void adds() { assertEquals(5, Calc.add(2, 3)); }
  @Test public void resource() throws Exception { assertEquals("hello", Calc.greeting()); }
}'
mk /tmp/junit5-demo org.junit.jupiter junit-jupiter "$(packaged org/junit/jupiter/junit-jupiter)" 'package demo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import org.junit.jupiter.api.Test;
class CalcTest {
  @Test void adds() { assertEquals(5, Calc.add(2, 3)); }
  @Test void resource() throws Exception { assertEquals("hello", Calc.greeting()); }
}' -javaagent:/usr/local/share/jacoco/jacocoagent.jar=destfile=target/jacoco.exec
for p in /tmp/junit4-demo /tmp/junit5-demo; do
  (cd "$p" && mvn -B clean verify > build.log 2>&1) || { tail -n 40 "$p/build.log"; exit 1; }
  grep -E "Tests run: 2, Failures: 0, Errors: 0, Skipped: 0$" "$p/build.log" > /dev/null ||
    { tail -n 40 "$p/build.log"; echo "unexpected test counts in $p"; exit 1; }
  ls "$p"/target/*.jar "$p"/target/surefire-reports/*.xml
  echo "$p: BUILD SUCCESS offline"
done
grep -h 'Total time' /tmp/junit4-demo/build.log /tmp/junit5-demo/build.log | sed 's/\x1b\[[0-9;]*m//g'
OUTER
}

# JaCoCo on this JDK's own class files: sealed types and records (Java 17) compiled with --release N (and a
# pattern switch over them for 21), run under the agent; JaCoCo's analyzer (org.jacoco.core, as reports use it)
# must then count covered lines in every class. JDK 11 gets a plain class.
_jacoco_check() {
  echo "set -e; release=$jdk"
  cat <<'OUTER'
d=/tmp/jacoco-check
mkdir -p "$d/src/demo" "$d/classes"
if [ "$release" -ge 17 ]; then
  printf '%s\n' 'package demo;' 'public sealed interface Shape permits Circle, Square {' \
    '  default String kind() { return getClass().getSimpleName(); }' '}' > "$d/src/demo/Shape.java"
  echo 'package demo; public record Circle(double r) implements Shape {}' > "$d/src/demo/Circle.java"
  echo 'package demo; public record Square(double side) implements Shape {}' > "$d/src/demo/Square.java"
  if [ "$release" -ge 21 ]; then
    body='return switch (s) { case Circle c -> Math.PI * c.r() * c.r(); case Square q -> q.side() * q.side(); };'
  else
    body='if (s instanceof Circle c) return Math.PI * c.r() * c.r(); return ((Square) s).side() * ((Square) s).side();'
  fi
  shapes='new Circle(1), new Square(2)' show='area(s) + " " + s.kind()'
  classes="demo/Shape demo/Circle demo/Square demo/Main"
else
  echo 'package demo; public final class Shape {}' > "$d/src/demo/Shape.java"
  body='return s.hashCode();' shapes='new Shape()' show='area(s)' classes="demo/Main"
fi
printf '%s\n' 'package demo;' 'public final class Main {' "  static double area(Shape s) { $body }" \
  '  public static void main(String[] args) {' "    for (Shape s : new Shape[] { $shapes }) System.out.println($show);" \
  '  }' '}' > "$d/src/demo/Main.java"
printf '%s\n' 'import java.io.File;' 'import org.jacoco.core.analysis.*;' 'import org.jacoco.core.tools.ExecFileLoader;' \
  'public class Lines {  // exec-file classes-dir: "<class> <covered lines>/<lines>" per class' \
  '  public static void main(String[] args) throws Exception {' \
  '    ExecFileLoader exec = new ExecFileLoader();' \
  '    exec.load(new File(args[0]));' \
  '    CoverageBuilder coverage = new CoverageBuilder();' \
  '    new Analyzer(exec.getExecutionDataStore(), coverage).analyzeAll(new File(args[1]));' \
  '    for (IClassCoverage c : coverage.getClasses())' \
  '      System.out.println(c.getName() + " " + c.getLineCounter().getCoveredCount() + "/" + c.getLineCounter().getTotalCount());' \
  '  }' '}' > "$d/Lines.java"
javac --release "$release" -d "$d/classes" "$d"/src/demo/*.java
java -javaagent:/usr/local/share/jacoco/jacocoagent.jar=destfile="$d/jacoco.exec" -cp "$d/classes" demo.Main
[ -s "$d/jacoco.exec" ] || { echo "the JaCoCo agent wrote no coverage data"; exit 1; }
cp=/usr/share/java/org.jacoco.core.jar:/usr/share/java/asm.jar:/usr/share/java/asm-commons.jar:/usr/share/java/asm-tree.jar
java -cp "$cp" "$d/Lines.java" "$d/jacoco.exec" "$d/classes" | LC_ALL=C sort > "$d/lines.txt"
cat "$d/lines.txt"
for c in $classes; do
  grep -Eq "^$c [1-9][0-9]*/" "$d/lines.txt" || { echo "JaCoCo counted no covered line in $c (--release $release)"; exit 1; }
done
echo "JaCoCo: covered lines in $classes (--release $release)"
# The exec file the JUnit 5 demo's surefire fork wrote (_demo_projects, same scratch) is complete: Calc is covered.
# (A fork that hears none of surefire's commands is halted at its exit timeout while the agent writes.)
exec_bytes=$(cat /tmp/junit5-demo/target/jacoco.exec 2>/dev/null | wc -c)
if java -cp "$cp" "$d/Lines.java" /tmp/junit5-demo/target/jacoco.exec /tmp/junit5-demo/target/classes > "$d/surefire.txt" &&
   grep -Eq '^demo/Calc [1-9][0-9]*/' "$d/surefire.txt"; then
  echo "surefire + JaCoCo agent: $(cat "$d/surefire.txt"), $exec_bytes bytes"
else
  echo "the exec file of surefire's fork ($exec_bytes bytes) is incomplete: $(cat "$d/surefire.txt")"; exit 1
fi
OUTER
}

# git and patch apply a patch to a file (agents hand their changes over as patches).
_patch_check() {
  cat <<'OUTER'
set -e
mkdir -p /tmp/patch-check/a /tmp/patch-check/b && cd /tmp/patch-check
printf 'one\ntwo\n' > a/f.txt
printf 'one\n2\n' > b/f.txt
diff -u a/f.txt b/f.txt > f.patch || true
cp a/f.txt f.txt && patch -s f.txt < f.patch && cmp f.txt b/f.txt
git init -q repo && cp a/f.txt repo/f.txt && git -C repo apply -p1 ../f.patch && cmp repo/f.txt b/f.txt
echo "$(git --version), $(patch --version | head -n1): patch applied"
OUTER
}

recipe_verify() {
  local java maven
  in_root java -version >&2
  in_root javac -version >&2
  in_root mvn -B -v >&2
  java=$(in_root java -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n1)
  maven=$(in_root mvn -B -v 2>/dev/null | sed -e 's/\x1b\[[0-9;]*m//g' | sed -n 's/^Apache Maven \([^ ]*\).*/\1/p' | head -n1)
  if [ -z "$java" ] || [ -z "$maven" ]; then die "could not read the java/maven versions"; fi
  in_scratch_offline /bin/sh -c "$(_demo_projects; _jacoco_check)" >&2
  in_scratch_offline /bin/sh -c "$(_patch_check)" >&2
  label java "$java"
  label maven "$maven"
}

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
recipe_main ${args[@]+"${args[@]}"}
