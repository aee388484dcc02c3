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
# at build time (as in the reference). The package names are the same in the three suites.
RECIPE_PACKAGES="openjdk-$jdk-jdk-headless maven
  libmaven-clean-plugin-java libmaven-resources-plugin-java libmaven-compiler-plugin-java libsurefire-java
  libmaven-jar-plugin-java libmaven-install-plugin-java libmaven-deploy-plugin-java libmaven-source-plugin-java
  libmaven-javadoc-plugin-java libmaven-antrun-plugin-java libmaven-bundle-plugin-java
  junit4 junit5 libmockito-java libjacoco-java python3"

M2=/root/.m2   # HOME=/root in capsule sandboxes

recipe_setup() {
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

  # 5. JaCoCo has no Maven plugin in Debian: extract the runtime agent for surefire's argLine
  #    (-javaagent:/usr/local/share/jacoco/jacocoagent.jar=destfile=...) and use org.jacoco.ant for reports.
  [ -f "$ROOT/usr/share/java/org.jacoco.agent.jar" ] || die "org.jacoco.agent.jar missing from the image"
  mkdir -p "$ROOT/usr/local/share/jacoco"
  in_root python3 -c 'import sys, zipfile
sys.stdout.buffer.write(zipfile.ZipFile("/usr/share/java/org.jacoco.agent.jar").read("jacocoagent.jar"))' \
    > "$ROOT/usr/local/share/jacoco/jacocoagent.jar"
}

# A JUnit 4 and a JUnit 5 project (the versions the suite packages) built with a plain `mvn -B clean verify`,
# without network.
_demo_projects() {
  cat <<'OUTER'
set -e
packaged() {  # the version of a group/artifact path in Debian's repository (not the debian or N.x aliases)
  ls "/usr/share/maven-repo/$1" | grep -E '^[0-9][0-9.]*$' | sort -V | tail -n1
}
mk() {  # dir junit-group junit-artifact junit-version test-source
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
}'
for p in /tmp/junit4-demo /tmp/junit5-demo; do
  (cd "$p" && mvn -B clean verify > build.log 2>&1) || { tail -n 40 "$p/build.log"; exit 1; }
  grep -E "Tests run: 2, Failures: 0, Errors: 0, Skipped: 0$" "$p/build.log" > /dev/null ||
    { tail -n 40 "$p/build.log"; echo "unexpected test counts in $p"; exit 1; }
  ls "$p"/target/*.jar "$p"/target/surefire-reports/*.xml
  echo "$p: BUILD SUCCESS offline"
done
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
  in_scratch_offline /bin/sh -c "$(_demo_projects)" >&2
  label java "$java"
  label maven "$maven"
}

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
recipe_main ${args[@]+"${args[@]}"}
