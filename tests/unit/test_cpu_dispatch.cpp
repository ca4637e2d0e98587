// The kernel library's CPU dispatch table (runtime/kernels/dispatch.h, kernels.def): each level
// gets the variants it runs and no others, XALLOC_CPU_ISA caps the process's table (a value that
// names no level is an error naming it), and every variant a level takes computes what the
// baseline computes: bit for bit where the kernel's order of operations is fixed (maxima,
// products, per-channel sums), within float rounding where the compiler may fuse a multiply-add
// (the matrix-vector product).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "../../runtime/kernels/dispatch.h"

using xalloc::runtime::cpuIsa;
using xalloc::runtime::CpuKernels;
using xalloc::runtime::cpuKernels;
using xalloc::runtime::Isa;
using xalloc::runtime::isaName;
using xalloc::runtime::kernelsFor;
using xalloc::runtime::Pool2d;

namespace {

// The levels this CPU runs, lowest first.
std::vector<Isa> levels() {
  std::vector<Isa> out;
  for (int i = 0; i <= static_cast<int>(cpuIsa()); ++i)
    out.push_back(static_cast<Isa>(i));
  return out;
}

std::vector<float> randomFloats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<float> v(n);
  for (float& x : v)
    x = d(rng);
  return v;
}

} // namespace

TEST(CpuDispatch, EachLevelTakesTheVariantsItRuns) {
  const CpuKernels base = kernelsFor(Isa::Baseline);
  EXPECT_EQ(base.isa, Isa::Baseline);
  // The rows with a baseline variant are never empty; the AVX-512-only ones are at the baseline.
  EXPECT_NE(base.maxAbsBits, nullptr);
  EXPECT_NE(base.poolRows, nullptr);
  EXPECT_NE(base.channelSums, nullptr);
  EXPECT_NE(base.scalePixels, nullptr);
  EXPECT_NE(base.matVec, nullptr);
  EXPECT_NE(base.interleavePairs, nullptr);
  EXPECT_EQ(base.siluRange, nullptr);
  EXPECT_EQ(base.interleave3, nullptr);
  // A level above this CPU's is capped to it.
  EXPECT_EQ(kernelsFor(Isa::Avx512f).isa, cpuIsa());
  const CpuKernels best = kernelsFor(Isa::Avx512f);
  EXPECT_EQ(best.siluRange != nullptr, cpuIsa() == Isa::Avx512f);
  EXPECT_EQ(best.interleave3 != nullptr, cpuIsa() == Isa::Avx512f);
  if (cpuIsa() != Isa::Baseline) {
    EXPECT_NE(best.maxAbsBits, base.maxAbsBits) << "AVX2 has a variant of its own";
    EXPECT_NE(best.poolRows, base.poolRows);
  }
  // Without XALLOC_CPU_ISA (the test runs without it) the process takes the CPU's best.
  if (std::getenv("XALLOC_CPU_ISA") == nullptr) {
    EXPECT_EQ(cpuKernels().isa, cpuIsa());
    EXPECT_EQ(cpuKernels().poolRows, best.poolRows);
  }
  EXPECT_STREQ(isaName(Isa::Avx2), "avx2");
}

// XALLOC_CPU_ISA read in a fresh process (the table is filled once): a level caps the table, and
// a value that names none is an error naming the variable and the value.
TEST(CpuDispatchDeathTest, TheEnvironmentCapsTheTable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("XALLOC_CPU_ISA", "baseline", 1);
        const CpuKernels& t = cpuKernels();
        std::cerr << "level " << isaName(t.isa) << (t.siluRange ? " silu" : " no-silu");
        std::exit(t.poolRows == kernelsFor(Isa::Baseline).poolRows ? 0 : 1);
      },
      testing::ExitedWithCode(0), "level baseline no-silu");
  EXPECT_EXIT(
      {
        setenv("XALLOC_CPU_ISA", "sse4", 1);
        try {
          (void)cpuKernels();
        } catch (const c10::Error& e) {
          std::cerr << e.what_without_backtrace();
          std::exit(3);
        }
        std::exit(0);
      },
      testing::ExitedWithCode(3), "XALLOC_CPU_ISA=sse4: expected avx512f, avx2 or baseline");
}

TEST(CpuDispatch, EveryLevelScansTheSame) {
  std::vector<float> v = randomFloats(1000, 1);
  for (int round = 0; round < 4; ++round) {
    if (round == 1)
      v[517] = 1e30f;
    if (round == 2)
      v[3] = -std::numeric_limits<float>::infinity();
    if (round == 3)
      v[999] = std::numeric_limits<float>::quiet_NaN();
    const auto* bits = reinterpret_cast<const std::uint32_t*>(v.data());
    for (std::int64_t n : {0, 1, 15, 17, 1000}) {
      const std::uint32_t want = kernelsFor(Isa::Baseline).maxAbsBits(bits, n);
      for (Isa isa : levels())
        EXPECT_EQ(kernelsFor(isa).maxAbsBits(bits, n), want) << isaName(isa) << " n=" << n;
    }
  }
}

TEST(CpuDispatch, EveryLevelShufflesAsAten) {
  // ShuffleNetV2's two groups: channel counts with and without a whole vector of halves.
  for (std::int64_t c : {2, 30, 58, 116}) {
    const at::Tensor x = at::randn({2, c, 5, 3}).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor want = at::channel_shuffle(x, 2);
    const std::int64_t pixels = x.numel() / c;
    for (Isa isa : levels()) {
      at::Tensor out = at::empty_like(want, at::MemoryFormat::ChannelsLast);
      const float* in = x.data_ptr<float>();
      kernelsFor(isa).interleavePairs({in, in + c / 2, out.data_ptr<float>(), c, c, c, c / 2}, 0,
                                      pixels);
      EXPECT_TRUE(at::equal(out, want)) << isaName(isa) << " c=" << c;
    }
  }
}

TEST(CpuDispatch, EveryLevelPoolsAsAten) {
  // 37 channels (not a multiple of 16), a 3x3 window of stride 2 with padding, one NaN.
  const std::int64_t c = 37, h = 9, w = 11;
  at::Tensor x = at::randn({1, c, h, w}).contiguous(at::MemoryFormat::ChannelsLast);
  x.index_put_({0, 5, 4, 4}, std::numeric_limits<float>::quiet_NaN());
  const at::Tensor want = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  Pool2d p{3, 3, 2, 2, 1, 1, 1, 1, want.size(2), want.size(3)};
  for (Isa isa : levels()) {
    at::Tensor out = at::empty_like(want, at::MemoryFormat::ChannelsLast);
    kernelsFor(isa).poolRows(p, x.data_ptr<float>(), out.data_ptr<float>(), h, w, c, 0, p.oh);
    EXPECT_TRUE(at::equal(out.isnan(), want.isnan())) << isaName(isa);
    EXPECT_TRUE(at::equal(at::nan_to_num(out), at::nan_to_num(want))) << isaName(isa);
  }
}

TEST(CpuDispatch, EveryLevelSqueezesAndScalesTheSame) {
  const std::int64_t pixels = 130, c = 40, rows = 24;
  const std::vector<float> x = randomFloats(pixels * c, 2), s = randomFloats(c, 3);
  const std::vector<float> wt = randomFloats(rows * c, 4), bias = randomFloats(rows, 5);
  const CpuKernels base = kernelsFor(Isa::Baseline);
  std::vector<float> sum0(c), block(c), scaled0(pixels * c), mv0(rows);
  base.channelSums(x.data(), pixels, c, 0, c, sum0.data(), block.data());
  base.scalePixels(x.data(), s.data(), scaled0.data(), c, 0, pixels);
  base.matVec(wt.data(), s.data(), bias.data(), mv0.data(), c, 0, rows);
  for (Isa isa : levels()) {
    const CpuKernels t = kernelsFor(isa);
    std::vector<float> sum(c), scaled(pixels * c), mv(rows);
    t.channelSums(x.data(), pixels, c, 0, c, sum.data(), block.data());
    t.scalePixels(x.data(), s.data(), scaled.data(), c, 0, pixels);
    t.matVec(wt.data(), s.data(), bias.data(), mv.data(), c, 0, rows);
    EXPECT_EQ(std::memcmp(sum.data(), sum0.data(), c * sizeof(float)), 0) << isaName(isa);
    EXPECT_EQ(scaled, scaled0) << isaName(isa);
    for (std::int64_t r = 0; r < rows; ++r)
      EXPECT_NEAR(mv[r], mv0[r], 1e-4f * (1.f + std::fabs(mv0[r]))) << isaName(isa) << " row " << r;
  }
}
