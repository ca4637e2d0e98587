// The SiLU pass the packed convolutions and linears run after oneDNN's kernel (silu_pass.h):
// the exact values within 3 units in the last place over every range of inputs (as ATen's), ATen's
// special values exactly (NaN, both infinities, signed zeros, the underflow to -0), every length's
// tail, and nothing written past the end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "../../runtime/kernels/silu_pass.h"

using xalloc::runtime::hasSiluPass;
using xalloc::runtime::siluInPlace;

namespace {

// |got - exact| in units of the float spacing at `exact` (exact: a double).
double ulpsOff(float got, double exact) {
  const float e = static_cast<float>(exact);
  const double spacing =
      std::nextafter(std::fabs(e), std::numeric_limits<float>::infinity()) - std::fabs(e);
  return std::fabs(static_cast<double>(got) - exact) / spacing;
}

// ATen's silu of `x` (its own CPU kernel) and the pass's, element by element.
void expectATensSilu(const std::vector<float>& x) {
  const at::Tensor in = at::tensor(x);
  const at::Tensor want = at::silu(in);
  std::vector<float> got = x;
  got.push_back(1234.5f); // a canary the pass must not touch
  siluInPlace(got.data(), static_cast<std::int64_t>(x.size()));
  ASSERT_EQ(got.back(), 1234.5f) << "written past n = " << x.size();
  const float* w = want.data_ptr<float>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "silu(" << x[i] << ") = " << got[i] << ", ATen: NaN";
      continue;
    }
    if (std::isinf(w[i]) || w[i] == 0.f) {
      EXPECT_EQ(got[i], w[i]) << "silu(" << x[i] << ")";
      EXPECT_EQ(std::signbit(got[i]), std::signbit(w[i])) << "silu(" << x[i] << ")";
      continue;
    }
    // Within 3 units in the last place of the exact value, as ATen's is (it is up to ~2.1 off
    // it, and this pass ~2.1 off on the other side: its exp is Sleef's, this one Cephes').
    const double xd = x[i];
    const double exact = xd / (1.0 + std::exp(-xd));
    EXPECT_LE(ulpsOff(got[i], exact), 3.0)
        << "silu(" << x[i] << ") = " << got[i] << ", ATen " << w[i] << ", exact " << exact;
  }
}

} // namespace

TEST(SiluPass, WithinThreeUlpsOverEveryRange) {
  if (!hasSiluPass())
    GTEST_SKIP() << "this CPU has no AVX-512F: the packed ops keep oneDNN's swish";
  std::mt19937 rng(7);
  std::vector<float> x;
  // Uniform over widening ranges, the overflow of exp(-x) near -88.7 and its underflow near 104
  // included, and tiny values around zero.
  for (float range : {1e-30f, 1e-3f, 1.f, 8.f, 30.f, 90.f, 110.f, 1e6f}) {
    std::uniform_real_distribution<float> d(-range, range);
    for (int i = 0; i < 20000; ++i)
      x.push_back(d(rng));
  }
  for (float c : {-88.72f, -87.33f, 88.72f, 103.97f, -103.97f})
    for (int i = -200; i <= 200; ++i)
      x.push_back(c + 0.001f * static_cast<float>(i));
  expectATensSilu(x);
}

TEST(SiluPass, SpecialValuesAreATens) {
  if (!hasSiluPass())
    GTEST_SKIP() << "this CPU has no AVX-512F";
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min();
  // ATen: silu(-inf) = -inf / inf = NaN; silu(-100) = -100 / inf = -0.
  expectATensSilu({nan, inf, -inf, -0.f, 0.f, -100.f, 100.f, tiny, -tiny, -1e30f, 1e30f,
                   std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest(), -nan});
}

TEST(SiluPass, EveryTailAndSplitBetweenThreads) {
  if (!hasSiluPass())
    GTEST_SKIP() << "this CPU has no AVX-512F";
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.f, 4.f);
  for (std::size_t n = 0; n <= 40; ++n) {
    std::vector<float> x(n);
    for (auto& v : x)
      v = d(rng);
    expectATensSilu(x);
  }
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  std::vector<float> big((1 << 20) + 13);
  for (auto& v : big)
    v = d(rng);
  expectATensSilu(big);
  at::set_num_threads(threads);
}
