// xrewrite's judgement of a rewrite beyond the tolerance (rewriter/src/noise_verdict.h): within
// twice what float32's own noise moves the original's outputs, the largest reference named.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "noise_verdict.h"

using xalloc::rewriter::judgeBesideNoise;
using xalloc::rewriter::NoiseReference;

namespace {
c10::IValue movedBy(const at::Tensor& a, double relative) {
  return a * (1 + relative);
}
// Two draws of one ulp of the inputs, then the others given.
std::vector<NoiseReference> refs(const at::Tensor& a, std::vector<NoiseReference> more = {}) {
  std::vector<NoiseReference> out{{movedBy(a, 1e-6), xalloc::rewriter::kInputUlp},
                                  {movedBy(a, 2e-6), xalloc::rewriter::kInputUlp}};
  out.insert(out.end(), more.begin(), more.end());
  return out;
}
} // namespace

// A deep, ill-conditioned model moves its outputs far more under one rounding per layer than
// under one ulp of its inputs: a rewrite that runs each layer in another order (oneDNN's
// kernels) is judged beside the former, and the verdict names it.
TEST(NoiseVerdict, EachLayersRoundingIsAReference) {
  const at::Tensor a = at::randn({64});
  const c10::IValue b = movedBy(a, 3e-4);
  const double error = 3e-4;
  auto alone = judgeBesideNoise(a, b, error, 1e-4, refs(a), std::nullopt);
  EXPECT_FALSE(alone.within) << "one ulp of the inputs alone bounds it at 1e-4";

  const NoiseReference layered{movedBy(a, 2e-4), xalloc::rewriter::kLayerUlp};
  const auto v = judgeBesideNoise(a, b, error, 1e-4, refs(a, {layered}), std::nullopt);
  EXPECT_TRUE(v.within);
  EXPECT_NEAR(v.bound, 4e-4, 1e-6);
  EXPECT_NE(v.why.find("each layer"), std::string::npos) << v.why;

  // Beyond twice the largest reference: refused.
  EXPECT_FALSE(
      judgeBesideNoise(a, movedBy(a, 5e-4), 5e-4, 1e-4, refs(a, {layered}), std::nullopt).within);
  // Freezing alone, larger still, is the one named.
  const NoiseReference small_layers{movedBy(a, 1e-5), xalloc::rewriter::kLayerUlp};
  const auto f =
      judgeBesideNoise(a, b, error, 1e-4, refs(a, {small_layers}), movedBy(a, 2.5e-4).toTensor());
  EXPECT_TRUE(f.within);
  EXPECT_NE(f.why.find("freezing alone"), std::string::npos) << f.why;
  // PyTorch's own channels-last, where it moves the outputs more than one ulp a layer does (a
  // deep detector's oneDNN kernels): the one named, and the bound twice it.
  const NoiseReference aten_cl{movedBy(a, 3.5e-4), xalloc::rewriter::kChannelsLast};
  const auto c = judgeBesideNoise(a, movedBy(a, 6e-4), 6e-4, 1e-4, refs(a, {small_layers, aten_cl}),
                                  std::nullopt);
  EXPECT_TRUE(c.within);
  EXPECT_NEAR(c.bound, 7e-4, 1e-6);
  EXPECT_NE(c.why.find("channels-last"), std::string::npos) << c.why;
}
