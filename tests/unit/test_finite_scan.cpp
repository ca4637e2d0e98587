// The packed ops' check of their input (finite_scan.h), split over the caller's threads: the same
// verdict and the same largest magnitude at one thread and at two, wherever in a buffer of many
// blocks the NaN, the infinity or the largest value sits, and for lengths that end mid-block.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <ATen/Parallel.h>

#include "../../runtime/kernels/finite_scan.h"

using xalloc::runtime::anyNaN;
using xalloc::runtime::FloatScan;
using xalloc::runtime::scanFloats;

namespace {

struct Threads {
  explicit Threads(int n) : was(at::get_num_threads()) { at::set_num_threads(n); }
  ~Threads() { at::set_num_threads(was); }
  int was;
};

void expectSame(const FloatScan& a, const FloatScan& b) {
  EXPECT_EQ(a.finite, b.finite);
  EXPECT_EQ(a.has_nan, b.has_nan);
  if (a.finite) {
    EXPECT_EQ(a.max_abs, b.max_abs);
  }
}

} // namespace

TEST(FiniteScan, EveryThreadCountSaysTheSame) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{1000}, std::int64_t{(1 << 15) + 3},
                               std::int64_t{(1 << 20) + 17}}) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& v : x)
      v = u(rng);
    // The largest, then an infinity, then a NaN beside an infinity, at the start, in the middle
    // (another thread's block) and at the very end.
    for (const std::int64_t at : {std::int64_t{0}, n / 2, n - 1}) {
      for (const float special : {-7.5f, inf, nan}) {
        std::vector<float> y = x;
        y[static_cast<std::size_t>(at)] = special;
        if (special != special && n > 1) // a NaN and an infinity together: the NaN is still found
          y[static_cast<std::size_t>(at == 0 ? n - 1 : 0)] = -inf;
        FloatScan one, two;
        {
          Threads t(1);
          one = scanFloats(y.data(), n);
        }
        {
          Threads t(2);
          two = scanFloats(y.data(), n);
        }
        expectSame(one, two);
        EXPECT_EQ(one.finite, special == -7.5f) << n << " " << at;
        EXPECT_EQ(one.has_nan, special != special) << n << " " << at;
        if (special == -7.5f) {
          EXPECT_EQ(one.max_abs, 7.5f);
        }
        EXPECT_EQ(anyNaN(y.data(), n), special != special);
      }
    }
  }
  EXPECT_TRUE(scanFloats(nullptr, 0).finite);
}
