// The products' epilogue (epilogue.cpp): bias and activation over rows in place, each variant
// ATen's op on the same floats, NaN, infinity and overflow where ATen's are; and the packed GEMM
// path that runs it tile by tile (1x1 convolutions and small linears) against ATen's ops.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "xalloc/runtime/packed.h"

#include "../../runtime/kernels/dispatch.h"
#include "../../runtime/kernels/epilogue.h"
#include "packed_cases.h"

using namespace xalloc::runtime;
using namespace xalloc::testing;

namespace {

const std::pair<Activation, const char*> kActivations[] = {
    {Activation::None, "none"},
    {Activation::Relu, "relu"},
    {Activation::Silu, "silu"},
    {Activation::Hardswish, "hardswish"},
    {Activation::Sigmoid, "sigmoid"},
    {Activation::Relu6, "relu6"},
    {Activation::Hardsigmoid, "hardsigmoid"}};

at::Tensor atenActivation(const at::Tensor& y, Activation a) {
  switch (a) {
  case Activation::None:
    return y;
  case Activation::Relu:
    return at::relu(y);
  case Activation::Silu:
    return at::silu(y);
  case Activation::Hardswish:
    return at::hardswish(y);
  case Activation::Sigmoid:
    return at::sigmoid(y);
  case Activation::Relu6:
    return at::hardtanh(y, 0, 6);
  case Activation::Hardsigmoid:
    return at::hardsigmoid(y);
  }
  return y;
}

// Values that test the edges: NaN, infinities, zeros of both signs, where exp overflows and
// underflows, where hardswish's product overflows, and ordinary ones.
at::Tensor edgyRows(std::int64_t rows, std::int64_t ld) {
  at::manual_seed(3);
  at::Tensor t = at::randn({rows, ld}).mul(4);
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {NAN,     inf,      -inf,   0.f,   -0.f,   88.5f,  88.8f,  89.f,
                           -87.f,   -87.5f,   -88.8f, -89.f, -100.f, 100.f,  1e30f,  -1e30f,
                           5.7e37f, -5.7e37f, 3.f,    -3.f,  6.f,    1e-30f, -1e-42f};
  float* p = t.data_ptr<float>();
  for (std::size_t i = 0; i < std::size(special) && i < static_cast<std::size_t>(t.numel()); ++i)
    p[(i * 7) % t.numel()] = special[i];
  return t;
}

} // namespace

TEST(Epilogue, EveryVariantIsATensActivationOfTheBiasedRows) {
  for (const Isa isa : {Isa::Baseline, Isa::Avx2, Isa::Avx512f}) {
    const CpuKernels k = kernelsFor(isa);
    ASSERT_NE(k.biasActivateRows, nullptr) << isaName(isa);
    for (const auto& [a, name] : kActivations)
      for (const std::int64_t n : {1, 7, 8, 9, 24, 101})
        for (const bool with_bias : {true, false}) {
          const std::int64_t rows = 5, ld = n + 3;
          at::Tensor c = edgyRows(rows, ld);
          const at::Tensor bias = at::randn({n});
          const at::Tensor before = c.clone();
          k.biasActivateRows(c.data_ptr<float>(), rows, n, ld,
                             with_bias ? bias.data_ptr<float>() : nullptr, a);
          at::Tensor in = before.narrow(1, 0, n);
          if (with_bias)
            in = in + bias;
          const at::Tensor ref = atenActivation(in, a);
          const at::Tensor got = c.narrow(1, 0, n);
          const std::string what = std::string(name) + " n=" + std::to_string(n) + " bias " +
                                   std::to_string(with_bias) + " " + isaName(k.isa);
          EXPECT_TRUE(at::equal(at::isnan(got), at::isnan(ref))) << what;
          EXPECT_TRUE(at::equal(at::isinf(got), at::isinf(ref))) << what;
          const at::Tensor finite = at::isfinite(ref);
          const at::Tensor g = got.masked_select(finite), r = ref.masked_select(finite);
          EXPECT_TRUE(at::allclose(g, r, 1e-6, 1e-30)) << what << ": " << (g - r).abs().max();
          EXPECT_TRUE(
              at::equal(got.masked_select(at::isinf(ref)), ref.masked_select(at::isinf(ref))))
              << what;
          // The columns past n are another row's business.
          EXPECT_TRUE(at::equal(c.narrow(1, n, ld - n), before.narrow(1, n, ld - n))) << what;
        }
  }
}

TEST(Epilogue, NoRowsOrNoColumnsTouchNothing) {
  float v = NAN;
  biasActivate(&v, 0, 4, 4, nullptr, Activation::Silu);
  biasActivate(&v, 3, 0, 0, nullptr, Activation::Silu);
  EXPECT_TRUE(std::isnan(v));
  EXPECT_FALSE(epilogueActivation(PostOp::Gelu).has_value()); // ATen's gelu runs for these
  EXPECT_FALSE(epilogueActivation(PostOp::Tanh).has_value());
  EXPECT_EQ(epilogueActivation(PostOp::Silu), Activation::Silu);
}

TEST(Epilogue, TiledPointwiseConvolutionsAreATensOnAnyThreadCount) {
  if (!hasPackedConv())
    GTEST_SKIP() << "this torch has no oneDNN convolution ops";
  const int threads = at::get_num_threads();
  // 1600 pixels of 96 channels: ten tiles and a short one; 5 outputs: a column tail.
  for (const std::int64_t outs : {96, 5, 300})
    for (const char* post : {"none", "relu", "silu", "hardswish", "sigmoid", "gelu", "tanh"})
      for (const int t : {1, 2}) {
        at::set_num_threads(t);
        at::manual_seed(11);
        auto conv = c10::make_intrusive<PackedConv>(
            at::randn({outs, 24, 1, 1}).mul(0.2), at::randn({outs}),
            std::vector<std::int64_t>{1, 1}, std::vector<std::int64_t>{0, 0},
            std::vector<std::int64_t>{1, 1}, 1, post);
        ASSERT_TRUE(conv->pointwise());
        const at::Tensor x = at::randn({2, 24, 40, 20}).contiguous(at::MemoryFormat::ChannelsLast);
        const at::Tensor got = conv->run(x), ref = conv->reference(x);
        EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
        EXPECT_LT(relError(got, ref), 1e-5)
            << post << " " << outs << " outputs, " << t << " threads";
      }
  at::set_num_threads(threads);
}

TEST(Epilogue, NaNAndInfinityInAPointwiseConvolutionComeOutWhereATensDo) {
  if (!hasPackedConv())
    GTEST_SKIP() << "this torch has no oneDNN convolution ops";
  for (const char* post : {"relu", "silu", "hardswish", "sigmoid"}) {
    auto conv = c10::make_intrusive<PackedConv>(
        at::randn({32, 16, 1, 1}), at::randn({32}), std::vector<std::int64_t>{1, 1},
        std::vector<std::int64_t>{0, 0}, std::vector<std::int64_t>{1, 1}, 1, post);
    at::Tensor x = at::randn({1, 16, 30, 30});
    x.index_put_({0, 2, 3, 4}, NAN);
    x.index_put_({0, 5, 10, 10}, std::numeric_limits<float>::infinity());
    x.index_put_({0, 7, 20, 1}, -std::numeric_limits<float>::infinity());
    x = x.contiguous(at::MemoryFormat::ChannelsLast);
    expectSameNonFinite(conv->run(x), conv->reference(x), post);
  }
}
