// Timing helpers of the profiler that need no model: budgeted repetition counts and the
// progress output.
#include <chrono>
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "xalloc/profiler/measure.h"
#include "xalloc/profiler/progress.h"

using namespace xalloc;

TEST(Measure, SlowWorkIsTimedFewerTimesWithinItsBudget) {
  using profiler::budgetedCounts;
  // Fast work keeps the requested counts.
  auto fast = budgetedCounts(0.05, 3, 15, 1000, 5);
  EXPECT_EQ(fast.warmup, 3);
  EXPECT_EQ(fast.repeats, 15);
  EXPECT_EQ(budgetedCounts(1000.0 / 15, 3, 15, 1000, 5).repeats, 15); // exactly fits
  // Slower: as many as fit the budget, one warm-up.
  auto slow = budgetedCounts(100, 3, 15, 1000, 5);
  EXPECT_EQ(slow.warmup, 1);
  EXPECT_EQ(slow.repeats, 10);
  // Far slower: the floor, and never more than asked for.
  EXPECT_EQ(budgetedCounts(400, 3, 15, 1000, 5).repeats, 5);
  EXPECT_EQ(budgetedCounts(400, 3, 4, 1000, 5).repeats, 4);
  EXPECT_EQ(budgetedCounts(400, 0, 15, 1000, 5).warmup, 0);
  // An unmeasured run (0, NaN) changes nothing.
  EXPECT_EQ(budgetedCounts(0, 3, 15, 1000, 5).repeats, 15);
  EXPECT_EQ(budgetedCounts(std::nan(""), 3, 15, 1000, 5).repeats, 15);
}

TEST(Progress, OffATerminalPrintsPlainLinesAtItsInterval) {
  if (::isatty(STDERR_FILENO))
    GTEST_SKIP() << "stderr is a terminal: the bar is drawn instead";
  testing::internal::CaptureStderr();
  {
    profiler::Progress every_time(true, std::chrono::milliseconds(0));
    every_time.phase("re-running consumers", 4);
    every_time.tick(2);
    profiler::Progress rarely(true, std::chrono::hours(1)); // a short run prints nothing
    rarely.phase("timing ops", 3);
    rarely.tick(3);
    profiler::Progress quiet(false, std::chrono::milliseconds(0));
    quiet.phase("sweeping layouts", 5);
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "xprof: re-running consumers 0/4 (0m00s)\n"
                                                    "xprof: re-running consumers 2/4 (0m00s)\n");
}
