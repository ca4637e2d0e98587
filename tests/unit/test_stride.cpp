// The stride-aware cost model: kernel paths and features from sizes and strides, the NNLS solver
// (KKT conditions), recovery of a known model, the bandwidth floor, Kendall's tau, and the
// documented handling of degenerate input.
#include <cmath>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "xalloc/costfit/random_layouts.h"
#include "xalloc/costfit/stride.h"

using namespace xalloc;
using namespace xalloc::costfit;
using formats::Layout;

namespace {

Layout layout(std::vector<std::int64_t> sizes, std::vector<std::int64_t> strides,
              std::string dtype = "float32") {
  Layout l;
  l.sizes = std::move(sizes);
  l.strides = std::move(strides);
  l.dtype = std::move(dtype);
  return l;
}

formats::CacheInfo caches() {
  formats::CacheInfo c;
  c.l1d_bytes = 48 << 10;
  c.l2_bytes = 1 << 20;
  c.l3_bytes = 32 << 20;
  return c;
}

} // namespace

TEST(Stride, PathsFollowPyTorchsCopyKernels) {
  EXPECT_EQ(strideFeatures(layout({100, 64}, {1, 100}), caches()).path, CopyPath::Transpose2d);
  // Too small for the blocked transpose (under 3600 elements): the strided loop.
  EXPECT_EQ(strideFeatures(layout({50, 60}, {1, 50}), caches()).path, CopyPath::Strided);
  EXPECT_EQ(strideFeatures(layout({8, 100, 64}, {64, 512, 1}), caches()).path,
            CopyPath::Vectorized);
  EXPECT_EQ(strideFeatures(layout({8, 100, 64}, {64, 512, 1}, "float16"), caches()).path,
            CopyPath::Strided)
      << "float16 is copied element by element";
  EXPECT_EQ(strideFeatures(layout({8, 64}, {1, 0}), caches()).path, CopyPath::Broadcast);
  EXPECT_EQ(strideFeatures(layout({8, 64}, {1, 8}), caches()).path, CopyPath::Strided);
}

TEST(Stride, FeaturesCountWhatTheKernelDoes) {
  // [4, 64] rows of a [4, 128] tensor: merged dims (4, 128) and (64, 1); 4 rows of 64.
  auto f = strideFeatures(layout({4, 64}, {128, 1}), caches()).x;
  EXPECT_EQ(f[0], 1);    // fixed
  EXPECT_EQ(f[2], 4);    // rows
  EXPECT_EQ(f[5], 256);  // numel4
  EXPECT_EQ(f[7], 1024); // bytes
  EXPECT_EQ(f[10], 0);   // fits in L1: no misses
  // Dimensions contiguous in the source merge: a transposed [2, 3, 4] tensor's last two
  // dimensions taken together is one row per outer index.
  auto g = strideFeatures(layout({4, 6}, {1, 4}), caches()).x; // 24 elements, 2-D transpose
  EXPECT_EQ(g[2], 4);                                          // 4 rows of 6
  // A layout far beyond L3 with page-sized jumps misses the TLB on every element.
  auto h = strideFeatures(layout({64, 200000}, {1, 64}), caches()).x;
  EXPECT_GT(h[14] + h[13], 0); // L3 misses
  EXPECT_GT(h[18] + h[17], 0); // second-level TLB misses
  // Negative strides count by magnitude; an empty layout costs only the fixed term.
  EXPECT_EQ(strideFeatures(layout({4, 64}, {-128, 1}), caches()).x,
            strideFeatures(layout({4, 64}, {128, 1}), caches()).x);
  auto empty = strideFeatures(layout({0, 64}, {64, 1}), caches()).x;
  EXPECT_EQ(std::accumulate(empty.begin(), empty.end(), 0.0), 1.0);
}

TEST(Stride, NnlsMeetsTheKktConditions) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::array<double, kStrideFeatures>> rows(60);
    std::vector<double> b(rows.size());
    std::array<double, kStrideFeatures> truth{};
    for (auto& t : truth)
      t = u(rng) < 0.4 ? 0.0 : u(rng) * 2 - 0.5; // some coefficients negative: must clamp
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (auto& v : rows[i])
        v = u(rng) * std::pow(10.0, static_cast<double>(rng() % 6)); // scales 1 to 1e5
      b[i] = std::inner_product(rows[i].begin(), rows[i].end(), truth.begin(), 0.0) + u(rng);
    }
    const std::vector<double> x = nnls(rows, b);
    // Gradient of 1/2|Ax - b|^2 is A'(Ax - b): zero on positive coefficients, >= 0 on zeros.
    std::array<double, kStrideFeatures> grad{};
    double scale = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const double r = std::inner_product(rows[i].begin(), rows[i].end(), x.begin(), 0.0) - b[i];
      for (int j = 0; j < kStrideFeatures; ++j) {
        grad[static_cast<std::size_t>(j)] += rows[i][static_cast<std::size_t>(j)] * r;
        scale = std::max(scale, std::abs(rows[i][static_cast<std::size_t>(j)] * b[i]));
      }
    }
    for (int j = 0; j < kStrideFeatures; ++j) {
      ASSERT_GE(x[static_cast<std::size_t>(j)], 0.0);
      if (x[static_cast<std::size_t>(j)] > 0)
        ASSERT_NEAR(grad[static_cast<std::size_t>(j)], 0.0, 1e-5 * scale) << "trial " << trial;
      else
        ASSERT_GE(grad[static_cast<std::size_t>(j)], -1e-5 * scale) << "trial " << trial;
    }
  }
}

TEST(Stride, RecoversAModelOfItsOwnFeaturesAndKeepsTheFloor) {
  std::mt19937_64 rng(11);
  std::array<double, kStrideFeatures> truth{};
  truth[0] = 3e-4;  // fixed
  truth[2] = 1e-6;  // rows
  truth[7] = 2e-8;  // bytes
  truth[14] = 5e-6; // random L3 misses
  std::vector<Sample> samples;
  for (int i = 0; i < 400; ++i) {
    Layout l = randomPermutedLayout(rng, {"float32", "float64", "bfloat16", "uint8"}, 4, 200);
    const auto f = strideFeatures(l, caches()).x;
    samples.push_back({l, std::inner_product(f.begin(), f.end(), truth.begin(), 0.0)});
  }
  auto m = fitStride(samples, "cpu", caches(), 1.0);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->features.size(), static_cast<std::size_t>(kStrideFeatures));
  auto cv = crossValidateStride(samples, caches(), 1.0, 5);
  ASSERT_TRUE(cv);
  EXPECT_LT(cv->first.mape, 2.0) << "a noiseless model of its own features";
  EXPECT_GT(*cv->first.kendall_tau, 0.98);
  EXPECT_GT(cv->second.mape, 2 * cv->first.mape) << "the classic line cannot follow strides";
  // The floor: never below bytes / floor bandwidth.
  formats::StrideModel fast = *m;
  fast.floor_gbps = 1e-3; // 1 MB/s
  Layout big = randomPermutedLayout(rng, {"float32", "float64", "bfloat16", "uint8"}, 4, 200);
  EXPECT_GE(predictStride(fast, big), static_cast<double>(big.bytes()) / 1e6 * 1e3);
}

TEST(Stride, DegenerateSamplesHaveDocumentedOutcomes) {
  const formats::CacheInfo c = caches();
  EXPECT_FALSE(fitStride({}, "cpu", c, 0).has_value()) << "no samples: no model";
  Sample nan{layout({4, 64}, {1, 4}), std::nan("")};
  Sample zero{layout({4, 64}, {1, 4}), 0.0};
  EXPECT_FALSE(fitStride({nan, zero}, "cpu", c, 0).has_value())
      << "no sample with a positive, finite time: no model";
  // One sample: the pooled model reproduces it.
  Sample one{layout({64, 64}, {1, 64}), 0.02};
  auto m = fitStride({one, nan}, "cpu", c, 0);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->paths.size(), 1u);
  EXPECT_EQ(m->paths[0].path, "any");
  EXPECT_NEAR(predictStride(*m, one.layout), 0.02, 0.002);
  EXPECT_FALSE(crossValidateStride({one}, c, 0, 5).has_value()) << "too few to hold out";
}

TEST(Stride, KendallTauRanksPredictions) {
  const std::vector<double> measured = {1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(*quality({10, 20, 30, 40, 50}, measured, 0).kendall_tau, 1.0);
  EXPECT_DOUBLE_EQ(*quality({5, 4, 3, 2, 1}, measured, 0).kendall_tau, -1.0);
  auto q = quality({1, 2, 3, 4, 10}, measured, 0);
  EXPECT_DOUBLE_EQ(q.max_ape, 100.0);
  EXPECT_DOUBLE_EQ(q.median_ape, 0.0);
  EXPECT_DOUBLE_EQ(q.mape, 20.0);
  EXPECT_TRUE(q.by_size.empty()); // no sizes given
}

TEST(Stride, ErrorsBySizeBand) {
  // 4 KiB and 8 KiB off by 10% and 30%, 128 KiB exact, 64 MiB off by 50%; nothing in 1-32 MiB.
  auto q = quality({1.1, 1.3, 2, 6}, {1, 1, 2, 4}, 0, {4096, 8192, 131072, std::int64_t{64} << 20});
  ASSERT_EQ(q.by_size.size(), 3u);
  EXPECT_EQ(q.by_size[0].from_bytes, 0);
  EXPECT_EQ(q.by_size[0].to_bytes, std::int64_t{65536});
  EXPECT_EQ(q.by_size[0].samples, 2);
  EXPECT_NEAR(q.by_size[0].mape, 20.0, 1e-9);
  EXPECT_EQ(q.by_size[1].from_bytes, 65536);
  EXPECT_NEAR(q.by_size[1].mape, 0.0, 1e-9);
  EXPECT_EQ(q.by_size[2].from_bytes, std::int64_t{32} << 20);
  EXPECT_FALSE(q.by_size[2].to_bytes.has_value());
  EXPECT_NEAR(q.by_size[2].mape, 50.0, 1e-9);
  EXPECT_NEAR(q.mape, 22.5, 1e-9);
}
