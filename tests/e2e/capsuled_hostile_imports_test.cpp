// Imports that try to stall capsuled: a FIFO named as the archive or the layout, while gc runs alongside.
// Each is refused with a 400 naming the file, the daemon keeps answering, and SIGTERM still ends it.
#include <sys/stat.h>

#include <future>

#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

TEST_F(Capsuled, FifoImportsAreRefusedAndNeverStallTheDaemon) {
  start();
  const fs::path fifo = dir_ / "image.tar";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const fs::path layout = make_dir("layout");
  write_file(layout / "oci-layout", R"({"imageLayoutVersion": "1.0.0"})");
  ASSERT_EQ(mkfifo((layout / "index.json").c_str(), 0644), 0);

  // Two imports and two gc calls at once: before, these held the image thread and both io threads.
  std::vector<std::future<HttpResponse>> calls;
  calls.push_back(std::async(std::launch::async, [&] {
    return call("POST", "/v1/images", {{"source", fifo.string()}, {"format", "archive"}, {"ref", "fifo/a:1"}});
  }));
  calls.push_back(std::async(std::launch::async, [&] {
    return call("POST", "/v1/images", {{"source", layout.string()}, {"format", "layout"}, {"ref", "fifo/b:1"}});
  }));
  for (int i = 0; i < 2; ++i) calls.push_back(std::async(std::launch::async, [&] { return call("POST", "/v1/images/gc"); }));
  for (std::size_t i = 0; i < calls.size(); ++i) {
    ASSERT_EQ(calls[i].wait_for(60s), std::future_status::ready) << "call " << i << " is blocked";
  }
  const HttpResponse archive = calls[0].get();
  EXPECT_EQ(archive.status, 400) << archive.body;
  EXPECT_NE(archive.body.find("not a regular file"), std::string::npos) << archive.body;
  const HttpResponse from_layout = calls[1].get();
  EXPECT_EQ(from_layout.status, 400) << from_layout.body;
  EXPECT_NE(from_layout.body.find("not a regular file"), std::string::npos) << from_layout.body;
  EXPECT_EQ(calls[2].get().status, 200);
  EXPECT_EQ(calls[3].get().status, 200);
  EXPECT_EQ(health()["status"], "ok");
  stop();  // SIGTERM ends it (expects a clean exit)
}

}  // namespace
}  // namespace capsule::testing
