// Tests of `capsule session cp` (client/session_files): uploads and downloads against a scripted server (the
// bytes, mode and tar sent; files renamed into place, tars unpacked), and the safe unpacking of downloaded tars.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "client/session_files.h"
#include "http/unix_client.h"
#include "tests/support/scripted_server.h"
#include "tests/support/test_support.h"

namespace capsule::client {
namespace {

namespace fs = std::filesystem;
using capsule::testing::ScriptedServer;

using capsule::testing::slurp;

// A fresh directory under /tmp, removed at the end of the test.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/capsule-session-files-test-XXXXXX";
    ASSERT_NE(::mkdtemp(name), nullptr);
    root_ = name;
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

// ---------------------------------------------------------------------------------------------------------
// Unpacking a downloaded tar: what stays inside the destination lands, what would leave it is refused.

struct TarEntry {
  std::string name;
  mode_t type = AE_IFREG;
  std::string content;     // a file's bytes
  std::string link;        // a symlink's target
  std::string hardlink;    // a hard link's target
  mode_t perm = 0;         // 0: 0755 for a directory, 0640 otherwise
  std::int64_t owner = 0;  // uid and gid the entry names
};
TarEntry file(std::string name, std::string content) { return {std::move(name), AE_IFREG, std::move(content), "", ""}; }
TarEntry dir(std::string name) { return {std::move(name), AE_IFDIR, "", "", ""}; }
TarEntry symlink(std::string name, std::string target) { return {std::move(name), AE_IFLNK, "", std::move(target), ""}; }
TarEntry hardlink(std::string name, std::string target) { return {std::move(name), AE_IFREG, "", "", std::move(target)}; }
TarEntry fifo(std::string name) { return {std::move(name), AE_IFIFO, "", "", ""}; }

void write_tar(const fs::path& file, const std::vector<TarEntry>& entries) {
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  EXPECT_EQ(archive_write_open_filename(a, file.c_str()), ARCHIVE_OK);
  for (const TarEntry& e : entries) {
    struct archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.name.c_str());
    archive_entry_set_filetype(entry, e.type);
    archive_entry_set_perm(entry, e.perm != 0 ? e.perm : e.type == AE_IFDIR ? 0755 : 0640);
    archive_entry_set_uid(entry, e.owner);
    archive_entry_set_gid(entry, e.owner);
    if (!e.link.empty()) archive_entry_set_symlink(entry, e.link.c_str());
    if (!e.hardlink.empty()) archive_entry_set_hardlink(entry, e.hardlink.c_str());
    if (e.type == AE_IFREG && e.hardlink.empty()) archive_entry_set_size(entry, e.content.size());
    archive_write_header(a, entry);
    if (!e.content.empty()) archive_write_data(a, e.content.data(), e.content.size());
    archive_entry_free(entry);
  }
  archive_write_free(a);
}

class TarUnpack : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(root_ / "out");
  }

  std::uint64_t unpack(const std::vector<TarEntry>& entries) {
    const fs::path file = root_ / "in.tar";
    write_tar(file, entries);
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    struct Close {
      int fd;
      ~Close() { ::close(fd); }
    } close{fd};
    return unpack_tar_into(fd, root_ / "out");
  }
};

TEST_F(TarUnpack, FilesDirsAndLinksLandInside) {
  const fs::path before = fs::current_path();
  EXPECT_EQ(unpack({dir("dir"), file("dir/a.txt", "hello"), symlink("dir/link", "a.txt"), hardlink("dir/hard", "dir/a.txt")}),
            4u);
  EXPECT_EQ(slurp(root_ / "out/dir/a.txt"), "hello");
  EXPECT_EQ(fs::read_symlink(root_ / "out/dir/link"), "a.txt");
  EXPECT_EQ(fs::hard_link_count(root_ / "out/dir/a.txt"), 2u);
  EXPECT_EQ(fs::status(root_ / "out/dir/a.txt").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(fs::current_path(), before);  // the working directory is restored
}

// What a box made is never a privilege on the host, whoever unpacks it (root here): no setuid or setgid bit, and
// every entry the unpacker's own, whatever owner the tar names (root's, or another id).
TEST_F(TarUnpack, EntriesAreTheUnpackersOwnWithoutSetuidOrSetgid) {
  TarEntry suid = file("suid", "x");
  suid.perm = 06755;
  TarEntry shared = dir("shared");
  shared.perm = 02775;
  shared.owner = 4242;
  TarEntry sticky = dir("sticky");
  sticky.perm = 01777;
  TarEntry plain = file("shared/plain", "y");
  plain.perm = 0700;
  plain.owner = 4242;
  EXPECT_EQ(unpack({suid, shared, sticky, plain}), 4u);
  const std::map<std::string, mode_t> expected = {{"suid", 0755}, {"shared", 0775}, {"sticky", 01777},
                                                  {"shared/plain", 0700}};
  for (const auto& [name, perm] : expected) {
    struct stat st {};
    ASSERT_EQ(::lstat((root_ / "out" / name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mode & 07777, perm) << name << ": " << std::oct << (st.st_mode & 07777);
    EXPECT_EQ(st.st_uid, ::getuid()) << name;
    EXPECT_EQ(st.st_gid, ::getgid()) << name;
  }
}

TEST_F(TarUnpack, DotDotEntriesAreRefused) {
  EXPECT_THROW(unpack({file("ok.txt", "x"), file("../escaped.txt", "x")}), std::runtime_error);
  EXPECT_FALSE(fs::exists(root_ / "escaped.txt"));
  EXPECT_THROW(unpack({file("a/../../escaped2.txt", "x")}), std::runtime_error);
  EXPECT_FALSE(fs::exists(root_ / "escaped2.txt"));
}

TEST_F(TarUnpack, AbsoluteEntriesAreRefused) {
  const fs::path target = root_ / "absolute.txt";
  EXPECT_THROW(unpack({file(target.string(), "x")}), std::runtime_error);
  EXPECT_FALSE(fs::exists(target));
}

TEST_F(TarUnpack, HardLinksLeavingTheTreeAreRefused) {
  const fs::path outside = root_ / "secret";
  std::ofstream(outside) << "secret";
  EXPECT_THROW(unpack({hardlink("stolen", outside.string())}), std::runtime_error);
  EXPECT_THROW(unpack({hardlink("stolen", "../secret")}), std::runtime_error);
  EXPECT_THROW(unpack({symlink("up", ".."), hardlink("stolen", "up/secret")}), std::runtime_error);
  EXPECT_FALSE(fs::exists(root_ / "out/stolen"));
}

TEST_F(TarUnpack, EntriesThroughAPlantedSymlinkAreRefused) {
  fs::create_directories(root_ / "elsewhere");
  EXPECT_THROW(unpack({symlink("door", (root_ / "elsewhere").string()), file("door/planted", "x")}),
               std::runtime_error);
  EXPECT_FALSE(fs::exists(root_ / "elsewhere/planted"));
}

TEST_F(TarUnpack, SpecialFilesAreSkipped) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(unpack({fifo("fifo"), file("file", "x")}), 1u);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("skipped fifo"), std::string::npos);
  EXPECT_FALSE(fs::exists(root_ / "out/fifo"));
  EXPECT_TRUE(fs::exists(root_ / "out/file"));
}


// ---------------------------------------------------------------------------------------------------------
// cp against a scripted daemon.

constexpr const char* kCreated = "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}";

std::string body_of(const std::string& request) { return request.substr(request.find("\r\n\r\n") + 4); }

using SessionCp = TempDirTest;

TEST_F(SessionCp, UploadsNameTheAbsoluteHostPathForTheDaemonToRead) {
  fs::create_directories(root_ / "tree/sub");
  std::ofstream(root_ / "tree/sub/a.txt") << "a";
  const fs::path before = fs::current_path();
  fs::current_path(root_);
  for (const auto& [local, remote, shown] : {std::tuple{"tree/sub/a.txt", "s1:/workspace/my a.txt", "tree/sub/a.txt"},
                                              {"./tree/", "s1:/workspace/t", "tree"},
                                              {"tree/sub/a.txt", "s1:/workspace/", "tree/sub/a.txt"}}) {
    std::string received;
    ScriptedServer server([&](int fd, const std::string& head) {
      received = head;
      testing::read_body(fd, received);
      ScriptedServer::send(fd, kCreated);
    });
    cmd_session_cp(server.path(), local, remote);
    std::string path = std::string(remote).substr(3);
    if (path.ends_with('/')) path += "a.txt";  // into that directory, under the local name
    EXPECT_TRUE(received.starts_with("PUT /v1/sessions/s1/files?path=" + http::url_encode(path) + " HTTP/1.1\r\n"))
        << received;
    EXPECT_NE(received.find("Content-Type: application/json\r\n"), std::string::npos);
    EXPECT_EQ(nlohmann::json::parse(body_of(received)),
              (nlohmann::json{{"source", (root_ / shown).string()}}));
  }
  fs::current_path(before);
}

TEST_F(SessionCp, AMissingLocalFileIsNamedWithoutAsking) {
  try {
    cmd_session_cp("/nonexistent/capsule.sock", (root_ / "missing").string(), "s1:/workspace/x");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing: no such file or directory"), std::string::npos) << e.what();
  }
}

TEST_F(SessionCp, ARefusedUploadThrowsTheDaemonsError) {
  const fs::path local = root_ / "f";
  std::ofstream(local) << "x";
  ScriptedServer server([](int fd, const std::string&) {
    ScriptedServer::send(fd, "HTTP/1.1 403 Forbidden\r\nContent-Length: 60\r\n\r\n"
                             "{\"error\":{\"code\":\"protected_path\",\"message\":\"tests/a is p\"}}");
  });
  try {
    cmd_session_cp(server.path(), local.string(), "s1:/workspace/tests/a");
    ADD_FAILURE() << "no error";
  } catch (const http::ResponseError& e) {
    EXPECT_EQ(e.code(), "protected_path");
  }
}

TEST_F(SessionCp, DownloadsAFileIntoADirectoryOrToAName) {
  for (const bool into_dir : {true, false}) {
    ScriptedServer server([](int fd, const std::string&) {
      ScriptedServer::send(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                               "Content-Length: 5\r\n\r\nbytes");
    });
    const fs::path destination = into_dir ? root_ : root_ / "renamed.txt";
    cmd_session_cp(server.path(), "s1:/workspace/out.txt", destination.string());
    EXPECT_TRUE(server.request().starts_with("GET /v1/sessions/s1/files?path=%2Fworkspace%2Fout.txt HTTP/1.1\r\n"));
    EXPECT_EQ(slurp(into_dir ? root_ / "out.txt" : destination), "bytes");
  }
  for (const auto& entry : fs::directory_iterator(root_)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".capsule-cp-")) << entry.path();
  }
}

TEST_F(SessionCp, DownloadsADirectoryByUnpackingItsTar) {
  write_tar(root_ / "served.tar", {dir("src"), file("src/main.c", "int main;"), symlink("latest", "src")});
  const std::string tar = slurp(root_ / "served.tar");
  ScriptedServer server([&](int fd, const std::string&) {
    ScriptedServer::send(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\nContent-Length: " +
                                 std::to_string(tar.size()) + "\r\n\r\n" + tar);
  });
  cmd_session_cp(server.path(), "s1:/workspace", (root_ / "copy").string());
  EXPECT_EQ(slurp(root_ / "copy/src/main.c"), "int main;");
  EXPECT_EQ(fs::read_symlink(root_ / "copy/latest"), "src");
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 2);  // served.tar, copy
}

TEST_F(SessionCp, AFailedDownloadLeavesNothing) {
  ScriptedServer server([](int fd, const std::string&) {
    ScriptedServer::send(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 53\r\n\r\n"
                             "{\"error\":{\"code\":\"not_found\",\"message\":\"no /x here\"}}");
  });
  EXPECT_THROW(cmd_session_cp(server.path(), "s1:/x", (root_ / "x").string()), http::ResponseError);
  EXPECT_TRUE(fs::is_empty(root_));
}

}  // namespace
}  // namespace capsule::client
