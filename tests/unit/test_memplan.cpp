// memplan: the live-bytes lower bound.
#include <gtest/gtest.h>

#include "xalloc/error.h"
#include "xalloc/memplan/liveness.h"

using xalloc::memplan::Interval;
using xalloc::memplan::peakLiveBytes;

TEST(Memplan, PeakLiveBytes) {
  EXPECT_EQ(peakLiveBytes({}), 0);
  EXPECT_EQ(peakLiveBytes({{0, 0, 5}}), 5);
  // [0,1] and [2,3] never overlap; [1,2] overlaps both.
  EXPECT_EQ(peakLiveBytes({{0, 1, 10}, {2, 3, 20}}), 20);
  EXPECT_EQ(peakLiveBytes({{0, 1, 10}, {2, 3, 20}, {1, 2, 5}}), 25);
  EXPECT_EQ(peakLiveBytes({{0, 9, 1}, {0, 9, 2}, {5, 5, 4}}), 7);
  EXPECT_THROW(peakLiveBytes({{3, 2, 1}}), xalloc::LogicError);
}
