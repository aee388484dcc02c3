// The collectors' shared helpers: quoting hostile text for error details (bounded, escaped, cut on a UTF-8
// boundary) and the search budget (problems, files found and directory entries, all bounded).
#include "daemon/record/workspace_glob.h"
#include "tests/support/scratch_dir_test.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;

class SearchBudgetTest : public testing::ScratchDirTest {
 protected:
  void write(const std::string& rel) { ScratchDirTest::write(rel, "x"); }
};

TEST_F(SearchBudgetTest, ProblemsAreListedUpToACapAndTheRestCounted) {
  SearchBudget budget;
  budget.max_problems = 2;
  for (int i = 0; i < 5; ++i) budget.note_problem("p" + std::to_string(i));
  EXPECT_EQ(budget.problems, (std::vector<std::string>{"p0", "p1"}));
  EXPECT_EQ(budget.problems_not_listed, 3u);
}

TEST_F(SearchBudgetTest, TheSearchStopsOnceMoreFilesThanWantedMatched) {
  for (int i = 0; i < 10; ++i) write("r/f" + std::to_string(i) + ".xml");
  SearchBudget budget;
  budget.max_found = 2;
  EXPECT_EQ(glob_within(dir_, {"r/*.xml"}, budget).size(), 3u);
  EXPECT_TRUE(budget.exhausted);
  ASSERT_EQ(budget.problems.size(), 1u);
  EXPECT_NE(budget.problems[0].find("more than 2 files matched"), std::string::npos) << budget.problems[0];

  SearchBudget by_bytes;
  by_bytes.found_bytes_left = 20;  // two of "r/fN.xml" (8 bytes each)
  EXPECT_EQ(glob_within(dir_, {"r/*.xml"}, by_bytes).size(), 2u);
  EXPECT_TRUE(by_bytes.exhausted);
}

TEST_F(SearchBudgetTest, EveryDirectoryEntryListedCostsAVisit) {
  for (int i = 0; i < 50; ++i) write("r/other" + std::to_string(i) + ".txt");
  SearchBudget budget;
  budget.visits_left = 10;
  EXPECT_TRUE(glob_within(dir_, {"r/*.xml"}, budget).empty());
  EXPECT_TRUE(budget.exhausted) << "50 entries listed on a budget of 10";
}

TEST(QuoteExcerpt, KeepsShortTextAndEscapesControlsQuotesAndBackslashes) {
  EXPECT_EQ(quote_excerpt("12x"), "12x");
  EXPECT_EQ(quote_excerpt("a\"b\\c\nd"), "a\\x22b\\x5cc\\x0ad");
}

TEST(QuoteExcerpt, CutsLongTextOnAUtf8Boundary) {
  EXPECT_EQ(quote_excerpt(std::string(1000, 'a')), std::string(64, 'a') + "...");
  const std::string euros = std::string(63, 'a') + "\xE2\x82\xAC\xE2\x82\xAC";  // 63 + two 3-byte characters
  EXPECT_EQ(quote_excerpt(euros), std::string(63, 'a') + "...");
  EXPECT_EQ(quote_excerpt(euros, 66), std::string(63, 'a') + "\xE2\x82\xAC...");
}

// A sandbox that swaps a directory for a symlink after the search (here: while the first file is read) cannot
// make the daemon read outside the root: files are opened beneath the root with no symlink on the way.
TEST_F(SearchBudgetTest, ADirectorySwappedForASymlinkIsNotFollowed) {
  write("r/a.xml");
  write("r/sub/b.xml");
  const std::string outside = dir_ + "-outside";
  fs::create_directories(outside);
  std::ofstream(outside + "/b.xml") << "secret";
  CollectLimits limits;
  limits.max_files = 10;
  limits.max_file_bytes = limits.max_total_bytes = 1 << 20;
  limits.max_visited = 1000;
  limits.deadline = std::chrono::steady_clock::time_point::max();
  std::vector<std::string> notes, read;
  collect_files(
      dir_, {"r/**/*.xml"}, limits, [&](std::string note) { notes.push_back(std::move(note)); },
      [&](const std::string& rel, std::string& content) {
        if (read.empty()) {
          fs::rename(dir_ + "/r/sub", dir_ + "/r/sub.real");
          fs::create_directory_symlink(outside, dir_ + "/r/sub");
        }
        read.push_back(rel + "=" + content);
      });
  fs::remove_all(outside);
  EXPECT_EQ(read, std::vector<std::string>{"r/a.xml=x"});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].substr(0, 18), "r/sub/b.xml: open:") << notes[0];
}

}  // namespace
}  // namespace capsule::daemon
