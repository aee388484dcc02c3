// Image sources that try to stall or outlive the store: FIFOs named as archives, FIFO blobs in a layout,
// an image whose etc/passwd is a FIFO, and temporary files and staging areas left by killed imports.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <future>

#include "store/blob_store.h"
#include "images/error.h"
#include "images/image_store.h"
#include "images/image_user.h"
#include "tests/images/fixtures.h"

namespace capsule::images::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Runs `action` on another thread; if it has not returned after 60 s it is blocked, so a writer opens `fifo`
// to release it and the test fails. Returns the ImageError message (empty when nothing was thrown).
template <typename Action>
std::string error_without_blocking(const fs::path& fifo, Action action) {
  auto result = std::async(std::launch::async, [&]() -> std::string {
    try {
      action();
    } catch (const base::Error& e) {
      return e.what();
    }
    return "";
  });
  if (result.wait_for(60s) != std::future_status::ready) {
    ADD_FAILURE() << "blocked on the FIFO " << fifo;
    const int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) close(fd);
  }
  return result.get();
}

TEST(HostileSources, ArchiveThatIsAFifoIsRefusedWithoutBlocking) {
  TempDir dir;
  ImageStore store(dir / "store");
  const fs::path fifo = dir / "image.tar";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string error = error_without_blocking(fifo, [&] { store.import_archive(fifo, "fifo:1"); });
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
  EXPECT_EQ(store.list().size(), 0u);
}

TEST(HostileSources, LayoutWithAFifoBlobIsRefusedWithoutBlocking) {
  TempDir dir;
  LayoutBuilder layout(dir / "layout");
  const Descriptor manifest = layout.add_image({{{"hello", 'f', "hi\n"}}});
  layout.write_index({manifest});
  // Replace the manifest blob by a FIFO of the same name.
  const fs::path blob = layout.blob_path(manifest.digest);
  fs::remove(blob);
  ASSERT_EQ(mkfifo(blob.c_str(), 0600), 0);
  ImageStore store(dir / "store");
  const std::string error = error_without_blocking(blob, [&] { store.import_layout(layout.dir(), "fifo:1"); });
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
}

TEST(HostileSources, IndexThatIsAFifoIsRefusedWithoutBlocking) {
  TempDir dir;
  LayoutBuilder layout(dir / "layout");
  const fs::path index = layout.dir() / "index.json";
  ASSERT_EQ(mkfifo(index.c_str(), 0600), 0);
  ImageStore store(dir / "store");
  const std::string error = error_without_blocking(index, [&] { store.import_layout(layout.dir(), "fifo:1"); });
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
}

TEST(HostileSources, PasswdThatIsAFifoIsNotRead) {
  TempDir dir;
  fs::create_directories(dir / "layer" / "etc");
  const fs::path passwd = dir / "layer" / "etc" / "passwd";
  ASSERT_EQ(mkfifo(passwd.c_str(), 0600), 0);
  const std::string error = error_without_blocking(passwd, [&] {
    const ImageUser user = resolve_image_user("0", {(dir / "layer").string()});
    EXPECT_EQ(user.uid, 0u);
  });
  EXPECT_EQ(error, "");
}

TEST(HostileSources, PasswdBehindASymlinkedEtcIsNotReadFromTheHost) {
  TempDir dir;
  fs::create_directories(dir / "layer");
  fs::create_directory_symlink("/etc", dir / "layer" / "etc");
  // Host /etc/passwd names root; through the symlink "root" would resolve. It must not be read.
  EXPECT_THROW(resolve_image_user("root", {(dir / "layer").string()}), base::Error);
}

TEST(HostileSources, TemporariesOfKilledWritersAreRemovedAndLiveOnesKept) {
  TempDir dir;
  store::BlobStore first(dir / "blobs");
  store::BlobWriter live = first.writer();
  live.write("partial", 7);
  // What a killed writer leaves: a temporary file nobody holds a lock on.
  write_file(dir / "blobs" / "tmp" / "blob-Abandoned", "half a blob");
  fs::create_directories(dir / "other");
  store::BlobStore second(dir / "blobs");  // as a restarted process opens the store
  EXPECT_FALSE(fs::exists(dir / "blobs" / "tmp" / "blob-Abandoned"));
  std::size_t left = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir / "blobs" / "tmp")) ++left;
  EXPECT_EQ(left, 1u) << "the live writer's temporary file is kept";
  EXPECT_EQ(live.commit(), second.put_bytes("partial"));
}

TEST(HostileSources, StagingOfAKilledImportIsRemovedWhenTheStoreOpens) {
  TempDir dir;
  { ImageStore store(dir / "store"); }
  fs::create_directories(dir / "store" / "tmp" / "import-Abandon" / "layers" / "x");
  write_file(dir / "store" / "tmp" / "import-Abandon" / "layers" / "x" / "big", std::string(4096, 'x'));
  ImageStore reopened(dir / "store");
  EXPECT_FALSE(fs::exists(dir / "store" / "tmp" / "import-Abandon"));
}

}  // namespace
}  // namespace capsule::images::testing
