// network "proxy" runs through a real capsuled: the package proxy listens inside each sandbox's own network
// namespace with the run's date; real pip resolves as of that date, post-cutoff files are 404 even by URL, the
// sandbox reaches nothing else, the record lists every object served, and per-package and relative cutoffs are
// stored absolute.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/dates.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

class CapsuledProxy : public Capsuled {
 protected:
  void SetUp() override {
    Capsuled::SetUp();
    const std::string script = std::string(CAPSULE_SOURCE_DIR) + "/tests/proxy/fixtures/package_upstream.py";
    const std::string command = "python3 " + script + " " + (dir_ / "fixture").string();
    FILE* out = popen(command.c_str(), "r");
    ASSERT_NE(out, nullptr);
    char line[4096] = {};
    const bool read = fgets(line, sizeof line, out) != nullptr;
    ASSERT_EQ(pclose(out), 0);
    ASSERT_TRUE(read);
    const json fixture = json::parse(line);
    const json config{{"proxy",
                       {{"pypi_mirror", fixture["pypi_mirror"]},
                        {"maven_mirror", {fixture["maven_mirror"]}},
                        {"maven_publish_times", fixture["maven_publish_times"]}}}};
    write_file(dir_ / "config.json", config.dump());
    start({"--config", (dir_ / "config.json").string()});
  }

  json proxy_run(const std::string& as_of, const std::string& script) const {
    json spec = sh(script);
    spec["network"] = "proxy";
    spec["as_of"] = as_of;
    return run_and_wait(spec);
  }
};

TEST_F(CapsuledProxy, PipResolvesTheNewestVersionsBeforeTheRunsDate) {
  const std::string download = "cd /tmp && python3 -m pip download -q -d dl alpha beta >&2 && ls dl";
  const json early = proxy_run("2022-07-01", download);
  ASSERT_EQ(early["state"], "succeeded") << early.dump(2);
  EXPECT_EQ(early["result"]["stdout"]["head"], "alpha-1.1-py3-none-any.whl\nbeta-0.9-py3-none-any.whl\n");
  const json later = proxy_run("2023-01-01", download);
  ASSERT_EQ(later["state"], "succeeded") << later.dump(2);
  EXPECT_EQ(later["result"]["stdout"]["head"], "alpha-1.1-py3-none-any.whl\nbeta-1.0-py3-none-any.whl\n");

  const json& proxy = later["proxy"];
  EXPECT_EQ(later["pinned"]["cutoff"], "2023-01-01") << "the cutoff is pinned with the run, once";
  bool saw_wheel = false;
  for (const auto& object : proxy["served"]) {
    EXPECT_EQ(object["sha256"].get<std::string>().size(), 64u);
    EXPECT_TRUE(object["source"] == "upstream" || object["source"] == "cache");
    if (object["url"] == "/pypi/snapshot/2023-01-01T00:00:00Z/files/beta/beta-1.0-py3-none-any.whl") {
      saw_wheel = true;
      EXPECT_EQ(object["size"], fs::file_size(dir_ / "fixture/pypi/files/beta-1.0-py3-none-any.whl"));
    }
  }
  EXPECT_TRUE(saw_wheel) << proxy.dump(2);
}

// The other pips on the machine (pyenv CPython builds in root's home, pip 18 to 24; old ones ask for HTML), each
// given to the sandbox read-only as its workspace. Skipped where there are none.
TEST_F(CapsuledProxy, EveryOtherPipOnTheMachineResolvesTheSame) {
  std::vector<fs::path> interpreters;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator("/root/.pyenv/versions", ignored)) {
    const auto python = entry.path() / "bin/python3";
    const std::string probe = python.string() + " -m pip --version >/dev/null 2>&1";
    if (entry.path().filename().string().rfind("3.", 0) == 0 && fs::exists(python) && std::system(probe.c_str()) == 0)
      interpreters.push_back(entry.path());
  }
  if (interpreters.empty()) GTEST_SKIP() << "no pyenv CPython 3 build with pip on this machine";
  for (const auto& prefix : interpreters) {
    json spec = sh("cd /tmp && python3 -m pip download -q --no-cache-dir -d dl alpha beta >&2 && ls dl");
    spec["network"] = "proxy";
    spec["as_of"] = "2022-07-01";
    spec["workspace"] = {{"path", prefix.string()}, {"mode", "ro"}};
    // The build is relocated to /workspace: it finds itself through these.
    spec["env"] = {{"PATH", "/workspace/bin:/usr/bin:/bin"}, {"PYTHONHOME", "/workspace"},
                   {"LD_LIBRARY_PATH", "/workspace/lib"}};
    const json run = run_and_wait(spec);
    EXPECT_EQ(run["result"]["stdout"]["head"], "alpha-1.1-py3-none-any.whl\nbeta-0.9-py3-none-any.whl\n")
        << prefix << ": " << run["result"]["stderr"]["head"];
  }
}

TEST_F(CapsuledProxy, PostCutoffFilesAndOtherDatesAreRefusedInsideTheSandbox) {
  const json run = proxy_run(
      "2022-07-01",
      "cd /tmp; python3 -m pip download -q -d dl "
      "http://127.0.0.1:3141/pypi/snapshot/2022-07-01T00:00:00Z/files/alpha/alpha-2.0-py3-none-any.whl "
      ">/dev/null 2>&1; echo direct=$?; python3 - <<'EOF'\n"
      "import urllib.request, urllib.error\n"
      "for url in ['http://127.0.0.1:3141/pypi/snapshot/2024-01-01/simple/alpha/',\n"
      "            'http://127.0.0.1:3141/maven/snapshot/2022-07-01T00:00:00Z/org/capsule/fixture/lib/1.1/lib-1.1.pom']:\n"
      "    try:\n"
      "        urllib.request.urlopen(url)\n"
      "        print('open')\n"
      "    except urllib.error.HTTPError as e:\n"
      "        print(e.code)\n"
      "EOF\n"
      "python3 -c \"import socket; s=socket.socket(); s.settimeout(2); print(s.connect_ex(('10.0.0.1', 80)))\"");
  ASSERT_EQ(run["state"], "succeeded") << run.dump(2);
  const std::string out = run["result"]["stdout"]["head"];
  EXPECT_NE(out.find("direct=1\n"), std::string::npos) << out;  // pip fails on the 404
  EXPECT_NE(out.find("403\n404\n"), std::string::npos) << out;  // other date refused; lib 1.1 is from 2022-08
  EXPECT_NE(out.find("101\n"), std::string::npos) << out;       // ENETUNREACH: no route out of the sandbox
}

TEST_F(CapsuledProxy, HostPipConfigurationNeverReachesTheSandbox) {
  json spec = sh("env | grep -E '^(PIP|UV)_' | sort; test -s ~/.m2/settings.xml && grep -c '<mirrorOf>\\*</mirrorOf>' ~/.m2/settings.xml");
  spec["network"] = "proxy";
  spec["as_of"] = "2022-07-01";
  spec["env"] = {{"PIP_FIND_LINKS", "/opt/wheels"}};
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "succeeded") << run.dump(2);
  const std::string out = run["result"]["stdout"]["head"];
  EXPECT_EQ(out.find("PIP_FIND_LINKS"), std::string::npos) << out;
  EXPECT_NE(out.find("PIP_CONFIG_FILE=/dev/null\n"), std::string::npos) << out;
  EXPECT_NE(out.find("PIP_INDEX_URL=http://127.0.0.1:3141/pypi/snapshot/2022-07-01T00:00:00Z/simple/\n"),
            std::string::npos) << out;
  EXPECT_NE(out.find("\n1\n"), std::string::npos) << out;
}

// Maven resolves a parent's version range, a plugin without a version (<release>) and a LATEST plugin from the
// rewritten maven-metadata.xml, through the settings.xml mirror capsuled wrote into the sandbox's fresh ~/.m2.
TEST_F(CapsuledProxy, MavenResolvesRangesReleaseAndLatestAsOfTheRunsDate) {
  const fs::path project = make_dir("maven-project");
  write_file(project / "pom.xml",
             "<project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n"
             "  <modelVersion>4.0.0</modelVersion>\n"
             "  <parent><groupId>org.capsule.fixture</groupId><artifactId>parent</artifactId>"
             "<version>[1.0,2.0)</version><relativePath/></parent>\n"
             "  <artifactId>demo</artifactId><version>1</version><packaging>pom</packaging>\n"
             "</project>\n");
  for (const auto& [as_of, expected] : std::vector<std::pair<std::string, std::string>>{
           {"2022-12-31", "1.1"}, {"2024-01-01", "1.2"}}) {
    json spec = sh(
        "mvn -B -q validate >&2 && ls ~/.m2/repository/org/capsule/fixture/parent | grep '^[0-9]' && "
        "mvn -B org.capsule.fixture:fixture-maven-plugin:echo | grep -o 'fixture-maven-plugin 1[.][0-9]' && "
        "mvn -B org.capsule.fixture:fixture-maven-plugin:LATEST:echo | grep -o 'fixture-maven-plugin 1[.][0-9]'");
    spec["network"] = "proxy";
    spec["as_of"] = as_of;
    spec["workspace"] = {{"path", project.string()}, {"mode", "cow"}};
    spec["cwd"] = "/workspace";
    const json run = run_and_wait(spec);
    ASSERT_EQ(run["state"], "succeeded") << run.dump(2);
    EXPECT_EQ(run["result"]["stdout"]["head"],
              expected + "\nfixture-maven-plugin " + expected + "\nfixture-maven-plugin " + expected + "\n")
        << as_of;
  }
}

// A session's proxy serves every exec with the session's date, each exec's record lists what was served while it
// ran, and a reset (a new box, a new network namespace) gets a proxy of its own again.
TEST_F(CapsuledProxy, ASessionResolvesThroughItsProxyInEveryExecAndAfterAReset) {
  const HttpResponse created = call("POST", "/v1/sessions", {{"network", "proxy"}, {"as_of", "2022-07-01"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = body_json(created)["id"];
  auto exec = [&](const std::string& script) {
    const HttpResponse response = call("POST", "/v1/sessions/" + id + "/exec", {{"script", script}});
    EXPECT_EQ(response.status, 200) << response.body;
    return body_json(response);
  };
  const std::string wheel = "/pypi/snapshot/2022-07-01T00:00:00Z/files/beta/beta-0.9-py3-none-any.whl";
  auto served = [](const json& record) {
    std::vector<std::string> urls;
    for (const auto& object : record["proxy"]["served"]) urls.push_back(object["url"]);
    return urls;
  };
  const json download = exec("cd /tmp && python3 -m pip download -q -d dl beta >&2 && ls dl");
  ASSERT_EQ(download["state"], "succeeded") << download.dump(2);
  EXPECT_EQ(download["result"]["stdout"]["head"], "beta-0.9-py3-none-any.whl\n");
  const std::vector<std::string> first = served(download);
  EXPECT_NE(std::find(first.begin(), first.end(), wheel), first.end()) << download["proxy"].dump(2);
  const json quiet = exec("test -f /tmp/dl/beta-0.9-py3-none-any.whl");
  EXPECT_EQ(quiet["state"], "succeeded") << "the box lives on between execs";
  EXPECT_TRUE(served(quiet).empty()) << "an exec lists only what was served while it ran: " << quiet["proxy"].dump(2);
  const json session = body_json(call("GET", "/v1/sessions/" + id));
  EXPECT_EQ(session["proxy"]["served_count"], first.size()) << session["proxy"].dump(2);

  ASSERT_EQ(call("POST", "/v1/sessions/" + id + "/reset").status, 200);
  const json again = exec("cd /tmp && python3 -m pip download -q -d dl alpha >&2 && ls dl");
  ASSERT_EQ(again["state"], "succeeded") << again.dump(2);
  EXPECT_EQ(again["result"]["stdout"]["head"], "alpha-1.1-py3-none-any.whl\n") << "the reset dropped /tmp/dl";
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + id).status, 200);

  const HttpResponse undated = call("POST", "/v1/sessions", {{"network", "proxy"}});
  expect_error(undated, 400, "invalid_spec", "as_of");
}

// Install with the proxy, test offline, same box: a session's network switches off between execs (the proxy's
// listener in the box is refused, the exec's spec says "none"), on again (pip resolves again), never while an
// exec runs, and a reset keeps the switch.
TEST_F(CapsuledProxy, ASessionsNetworkSwitchesOffAndOnBetweenExecs) {
  const HttpResponse created = call("POST", "/v1/sessions", {{"network", "proxy"}, {"as_of", "2022-07-01"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = body_json(created)["id"];
  EXPECT_EQ(body_json(created)["network"], "proxy");
  auto exec = [&](const std::string& script) {
    const HttpResponse response = call("POST", "/v1/sessions/" + id + "/exec", {{"script", script}});
    EXPECT_EQ(response.status, 200) << response.body;
    return body_json(response);
  };
  auto switch_to = [&](const std::string& mode) { return call("POST", "/v1/sessions/" + id + "/network", {{"mode", mode}}); };
  // A connection to the proxy's port inside the box: "connected" or the error's name.
  const std::string connect =
      "python3 -c \"import socket\ntry:\n socket.create_connection(('127.0.0.1', 3141), 5); print('connected')\n"
      "except OSError as e: print(type(e).__name__)\"";

  const json installed = exec("cd /tmp && python3 -m pip download -q -d dl beta >&2 && ls dl");
  ASSERT_EQ(installed["state"], "succeeded") << installed.dump(2);
  EXPECT_EQ(installed["spec"]["network"], "proxy");
  EXPECT_FALSE(installed["proxy"]["served"].empty()) << installed["proxy"].dump(2);

  // Never while an exec runs (a background one included).
  const HttpResponse background = call("POST", "/v1/sessions/" + id + "/exec", {{"argv", {"sleep", "60"}}, {"background", true}});
  ASSERT_EQ(background.status, 202) << background.body;
  const std::string sleeper = body_json(background)["id"];
  expect_error(switch_to("none"), 409, "execs_running", "1 execs queued or running");
  ASSERT_EQ(call("POST", "/v1/sessions/" + id + "/execs/" + sleeper + "/signal", {{"signal", "KILL"}}).status, 202);
  wait_finished(sleeper);
  // It counts as running until its record is made, a moment after its row says it ended.
  HttpResponse off;
  EXPECT_TRUE(eventually([&] { return (off = switch_to("none")).status != 409; })) << off.body;
  ASSERT_EQ(off.status, 200) << off.body;
  EXPECT_EQ(body_json(off)["network"], "none");
  EXPECT_EQ(body_json(off)["proxy"], nullptr);
  const json offline = exec(connect);
  EXPECT_EQ(offline["result"]["stdout"]["head"], "ConnectionRefusedError\n") << offline.dump(2);
  EXPECT_EQ(offline["spec"]["network"], "none");
  EXPECT_EQ(offline["proxy"], nullptr);
  EXPECT_EQ(exec("test -f /tmp/dl/beta-0.9-py3-none-any.whl")["state"], "succeeded") << "the same box, offline";
  EXPECT_EQ(switch_to("none").status, 200) << "switching to what it is changes nothing";

  const HttpResponse on = switch_to("proxy");
  ASSERT_EQ(on.status, 200) << on.body;
  EXPECT_EQ(body_json(on)["network"], "proxy");
  const json online = exec("cd /tmp && python3 -m pip download -q -d dl alpha >&2 && ls dl");
  ASSERT_EQ(online["state"], "succeeded") << online.dump(2);
  EXPECT_EQ(online["result"]["stdout"]["head"], "alpha-1.1-py3-none-any.whl\nbeta-0.9-py3-none-any.whl\n");
  EXPECT_EQ(online["spec"]["network"], "proxy");
  EXPECT_FALSE(online["proxy"]["served"].empty()) << online["proxy"].dump(2);

  // A reset keeps the switch: the new box's listener starts off.
  ASSERT_EQ(switch_to("none").status, 200);
  ASSERT_EQ(call("POST", "/v1/sessions/" + id + "/reset").status, 200);
  EXPECT_EQ(exec(connect)["result"]["stdout"]["head"], "ConnectionRefusedError\n");
  ASSERT_EQ(switch_to("proxy").status, 200);
  EXPECT_EQ(exec(connect)["result"]["stdout"]["head"], "connected\n");

  expect_error(switch_to("host"), 400, "invalid_spec", "mode: must be");
  expect_error(call("POST", "/v1/sessions/nosuch/network", {{"mode", "none"}}), 404, "not_found", "no session");
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + id).status, 200);
  expect_error(switch_to("none"), 409, "session_ended", "has ended");

  // A session made without the proxy has none to switch on.
  const HttpResponse plain = call("POST", "/v1/sessions", json::object());
  ASSERT_EQ(plain.status, 201) << plain.body;
  const std::string plain_id = body_json(plain)["id"];
  EXPECT_EQ(call("POST", "/v1/sessions/" + plain_id + "/network", {{"mode", "none"}}).status, 200);
  expect_error(call("POST", "/v1/sessions/" + plain_id + "/network", {{"mode", "proxy"}}), 400, "invalid_request",
               "created with network \"none\"");
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + plain_id).status, 200);
}

// A stack with egress "proxy": every service resolves through the stack's one proxy listener at the stack's date
// (the first service's box serves it in the shared namespace), and a stack without egress reaches no index.
TEST_F(CapsuledProxy, EveryServiceOfAStackResolvesThroughItsProxyAsOfItsDate) {
  const std::string download = "cd /tmp && python3 -m pip download -q -d dl alpha beta >&2 && ls dl";
  auto stage = [&](const std::string& name, const std::string& service) {
    return json{{"name", name}, {"service", service}, {"argv", {"sh", "-c", download}}};
  };
  const json spec = {{"services", {{"a", {{"image", "host"}}}, {"b", {{"image", "host"}}}}},
                     {"network", {{"egress", "proxy"}, {"as_of", "2022-07-01"}}},
                     {"stages", {{{"name", "deploy"}}, stage("from-a", "a"), stage("from-b", "b")}}};
  const HttpResponse created = call("POST", "/v1/stacks?wait=true", spec);
  ASSERT_EQ(created.status, 201) << created.body;
  const json stack = body_json(created);
  ASSERT_EQ(stack["state"], "up") << stack.dump(1);
  for (int i : {1, 2}) {
    const json run = get_run(stack["stages"][i]["exec_id"]);
    EXPECT_EQ(run["result"]["stdout"]["head"], "alpha-1.1-py3-none-any.whl\nbeta-0.9-py3-none-any.whl\n") << run.dump(1);
  }
  EXPECT_EQ(call("DELETE", "/v1/stacks/" + stack["id"].get<std::string>()).status, 200);

  json sealed = spec;
  sealed.erase("network");
  const json closed = body_json(call("POST", "/v1/stacks?wait=true", sealed));
  EXPECT_EQ(closed["state"], "failed");
  EXPECT_EQ(closed["failure"]["stage"], "from-a") << closed["failure"].dump();
  EXPECT_EQ(closed["failure"]["reason"], "test_failed");
  EXPECT_EQ(call("DELETE", "/v1/stacks/" + closed["id"].get<std::string>()).status, 200);
}

// A package dated by its own cutoff (uv's --exclude-newer-package), and a relative as_of resolved once, at
// submission: the stored spec holds absolute values, so submitting it again uses the same cutoffs.
TEST_F(CapsuledProxy, PackageCutoffsAndRelativeDatesAreStoredAbsolute) {
  json spec = sh("cd /tmp && python3 -m pip download -q -d dl alpha beta >&2 && ls dl");
  spec["network"] = "proxy";
  spec["as_of"] = "2022-07-01";
  spec["as_of_packages"] = {{"pypi", {{"Beta", "2023-01-01"}}}};
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "succeeded") << run.dump(2);
  EXPECT_EQ(run["result"]["stdout"]["head"], "alpha-1.1-py3-none-any.whl\nbeta-1.0-py3-none-any.whl\n")
      << "beta as of 2023-01-01 (1.0), alpha as of the run's date (1.1)";
  EXPECT_EQ(run["spec"]["as_of_packages"], json({{"pypi", {{"beta", "2023-01-01T00:00:00Z"}}}}));

  json relative = sh("true");
  relative["network"] = "proxy";
  relative["as_of"] = "P7D";
  const json resolved = run_and_wait(relative);
  ASSERT_EQ(resolved["state"], "succeeded") << resolved.dump(2);
  const std::string as_of = resolved["spec"]["as_of"];
  EXPECT_TRUE(base::parse_date(as_of)) << as_of;
  EXPECT_EQ(resolved["pinned"]["cutoff"], as_of);
  EXPECT_EQ(run_and_wait(resolved["spec"])["pinned"]["cutoff"], as_of);
  relative["as_of"] = "1 month";
  expect_error(call("POST", "/v1/runs", relative), 400, "invalid_spec", "as_of");
}

TEST_F(CapsuledProxy, ProxyRunsNeedADate) {
  json spec = sh("true");
  spec["network"] = "proxy";
  expect_error(call("POST", "/v1/runs", spec), 400, "invalid_spec", "as_of");
  spec["network"] = "host";
  expect_error(call("POST", "/v1/runs", spec), 400, "invalid_spec", "network");
}

}  // namespace
}  // namespace capsule::testing
