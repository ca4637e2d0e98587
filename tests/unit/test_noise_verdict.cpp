// xrewrite's judgement of a rewrite beyond the tolerance (rewriter/src/noise_verdict.h): within
// twice what float32's own noise moves the original's outputs, the largest reference named.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "noise_verdict.h"

using xalloc::rewriter::judgeBesideNoise;

namespace {
c10::IValue movedBy(const at::Tensor& a, double relative) {
  return a * (1 + relative);
}
} // namespace

// A deep, ill-conditioned model moves its outputs far more under one rounding per layer than
// under one ulp of its inputs: a rewrite that runs each layer in another order (oneDNN's
// kernels) is judged beside the former, and the verdict names it.
TEST(NoiseVerdict, EachLayersRoundingIsAReference) {
  const at::Tensor a = at::randn({64});
  const c10::IValue b = movedBy(a, 3e-4);
  const std::vector<c10::IValue> ulp{movedBy(a, 1e-6), movedBy(a, 2e-6)};
  const double error = 3e-4;
  auto alone = judgeBesideNoise(a, b, error, 1e-4, ulp, std::nullopt, std::nullopt);
  EXPECT_FALSE(alone.within) << "one ulp of the inputs alone bounds it at 1e-4";

  const auto v = judgeBesideNoise(a, b, error, 1e-4, ulp, movedBy(a, 2e-4), std::nullopt);
  EXPECT_TRUE(v.within);
  EXPECT_NEAR(v.bound, 4e-4, 1e-6);
  EXPECT_NE(v.why.find("each layer"), std::string::npos) << v.why;

  // Beyond twice the largest reference: refused.
  EXPECT_FALSE(
      judgeBesideNoise(a, movedBy(a, 5e-4), 5e-4, 1e-4, ulp, movedBy(a, 2e-4), std::nullopt)
          .within);
  // Freezing alone, larger still, is the one named.
  const auto f = judgeBesideNoise(a, b, error, 1e-4, ulp, movedBy(a, 1e-5), movedBy(a, 2.5e-4));
  EXPECT_TRUE(f.within);
  EXPECT_NE(f.why.find("freezing alone"), std::string::npos) << f.why;
}
