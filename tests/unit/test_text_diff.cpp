// Unified diffs: exact output on a small case, and on random edits the diff applied with
// patch(1) reproduces the new text.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "xalloc/io.h"
#include "xalloc/rewriter/text_diff.h"

using namespace xalloc::rewriter;

TEST(TextDiff, EqualTextsGiveNoDiff) {
  EXPECT_EQ(unifiedDiff("a\nb\n", "a\nb\n", "x", "y"), "");
  EXPECT_EQ(unifiedDiff("", "", "x", "y"), "");
}

TEST(TextDiff, SmallChangeHasContextAndHeaders) {
  std::string a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
  std::string b = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
  EXPECT_EQ(unifiedDiff(a, b, "a/f", "b/f"),
            "--- a/f\n+++ b/f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
  EXPECT_EQ(unifiedDiff("", "x\n", "a/f", "b/f"), "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+x\n");
}

TEST(TextDiff, ALastLineWithoutNewlineIsMarked) {
  // The last line changes in a file without a final newline: both sides are marked.
  EXPECT_EQ(unifiedDiff("a\nb\nc", "a\nb\nC", "a/f", "b/f"),
            "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n b\n-c\n\\ No newline at end of file\n"
            "+C\n\\ No newline at end of file\n");
  // Only the final newline is added: the line differs, though its text does not.
  EXPECT_EQ(unifiedDiff("a\nb", "a\nb\n", "a/f", "b/f"),
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
  // An unchanged last line without a newline, as context.
  EXPECT_EQ(unifiedDiff("a\nb", "A\nb", "a/f", "b/f"),
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\\ No newline at end of file\n");
}

TEST(TextDiff, RandomEditsRoundTripThroughPatch) {
  namespace fs = std::filesystem;
  if (std::system("command -v patch >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "patch(1) is not installed";
  fs::path dir = fs::temp_directory_path() / ("xalloc_diff_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::mt19937 rng(42);
  for (int round = 0; round < 40; ++round) {
    std::vector<std::string> lines;
    int n = static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i)
      lines.push_back("line " + std::to_string(rng() % 20));
    std::vector<std::string> edited = lines;
    int edits = static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      std::size_t pos = edited.empty() ? 0 : rng() % (edited.size() + 1);
      switch (rng() % 3) {
      case 0:
        edited.insert(edited.begin() + static_cast<std::ptrdiff_t>(pos),
                      "new " + std::to_string(e));
        break;
      case 1:
        if (pos < edited.size())
          edited.erase(edited.begin() + static_cast<std::ptrdiff_t>(pos));
        break;
      default:
        if (pos < edited.size())
          edited[pos] = "changed " + std::to_string(e);
      }
    }
    auto join = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& l : v)
        s += l + "\n";
      return s;
    };
    std::string before = join(lines), after = join(edited);
    // Files without a final newline too: the diff must say so for patch to reproduce them.
    if (rng() % 3 == 0 && !before.empty())
      before.pop_back();
    if (rng() % 3 == 0 && !after.empty())
      after.pop_back();
    std::string diff = unifiedDiff(before, after, "a/file.txt", "b/file.txt");
    xalloc::writeFileAtomic((dir / "file.txt").string(), before);
    xalloc::writeFileAtomic((dir / "p.diff").string(), diff);
    if (!diff.empty()) {
      // git apply is the stricter reader (it rejects a missing "\ No newline" marker).
      const std::string check =
          "cd " + dir.string() + " && git apply --check p.diff 2>/dev/null || ! command -v git";
      ASSERT_EQ(std::system(("( " + check + " ) >/dev/null").c_str()), 0) << diff;
      std::string cmd = "cd " + dir.string() + " && patch -s -p1 < p.diff";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << diff;
    }
    EXPECT_EQ(xalloc::readFile((dir / "file.txt").string()), after) << "round " << round << "\n"
                                                                    << diff;
  }
  fs::remove_all(dir);
}
