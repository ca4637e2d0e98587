// Depthwise convolutions run by the runtime's own kernel (depthwise_nhwc.cpp), as the packed
// convolutions call it: ATen's values within a rounding per tap at every kernel size, stride,
// padding and dilation and every channel tail; NaN and infinity where ATen's are; the residual
// form; each CPU variant against the baseline.
#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "xalloc/runtime/packed.h"

#include "../../runtime/kernels/dispatch.h"
#include "packed_cases.h"

using namespace xalloc::runtime;
using namespace xalloc::testing;

namespace {

struct Case {
  std::int64_t channels, k, stride, pad, dilation, size;
  const char* post;
};

c10::intrusive_ptr<PackedConv> depthwiseConv(const Case& c, bool bias, const std::string& post_op) {
  at::manual_seed(7);
  const at::Tensor w = at::randn({c.channels, 1, c.k, c.k}).mul(0.3);
  c10::optional<at::Tensor> b;
  if (bias)
    b = at::randn({c.channels});
  return c10::make_intrusive<PackedConv>(
      w, b, std::vector<std::int64_t>{c.stride, c.stride}, std::vector<std::int64_t>{c.pad, c.pad},
      std::vector<std::int64_t>{c.dilation, c.dilation}, c.channels, post_op);
}

const Case kCases[] = {{16, 3, 1, 1, 1, 56, "relu"},       {16, 3, 2, 1, 1, 57, "hardswish"},
                       {96, 5, 1, 2, 1, 7, "hardswish"},   {72, 5, 2, 2, 1, 28, "relu"},
                       {13, 3, 1, 1, 1, 9, "none"},        {40, 3, 1, 2, 2, 12, "relu6"},
                       {8, 3, 1, 0, 1, 3, "sigmoid"},      {200, 7, 1, 3, 1, 14, "none"},
                       {33, 3, 2, 0, 1, 4, "hardsigmoid"}, {24, 3, 1, 1, 1, 30, "silu"},
                       {20, 5, 2, 2, 1, 33, "gelu"}};

} // namespace

TEST(DepthwiseNhwc, PackedDepthwiseConvolutionsAreATens) {
  for (const Case& c : kCases)
    for (const bool bias : {true, false})
      for (const std::int64_t batch : {1, 2}) {
        auto conv = depthwiseConv(c, bias, c.post);
        ASSERT_TRUE(conv->depthwise());
        const at::Tensor x = at::randn({batch, c.channels, c.size, c.size + 1})
                                 .contiguous(at::MemoryFormat::ChannelsLast);
        const at::Tensor got = conv->run(x), ref = conv->reference(x);
        ASSERT_EQ(got.sizes(), ref.sizes()) << c.channels << "ch k" << c.k;
        EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
        EXPECT_LT(relError(got, ref), 1e-5)
            << c.channels << " channels, kernel " << c.k << ", stride " << c.stride << ", pad "
            << c.pad << ", dilation " << c.dilation << ", bias " << bias << ", batch " << batch;
      }
  // A row-major input is read as ATen reads it.
  auto conv = depthwiseConv(kCases[0], true, "relu");
  const at::Tensor x = at::randn({1, 16, 10, 11});
  EXPECT_LT(relError(conv->run(x), conv->reference(x)), 1e-5);
}

TEST(DepthwiseNhwc, NaNAndInfinityComeOutWhereATensDo) {
  for (const char* post : {"none", "relu", "hardswish"}) {
    auto conv = depthwiseConv({24, 3, 1, 1, 1, 8, post}, true, post);
    at::Tensor x = at::randn({1, 24, 8, 8}).contiguous(at::MemoryFormat::ChannelsLast);
    x.index_put_({0, 3, 2, 2}, NAN);
    x.index_put_({0, 17, 5, 6}, INFINITY);
    x.index_put_({0, 20, 0, 7}, -INFINITY);
    const at::Tensor got = conv->run(x), ref = conv->reference(x);
    EXPECT_TRUE(at::equal(at::isinf(got), at::isinf(ref))) << post;
    expectSameNonFinite(got, ref, post);
  }
}

TEST(DepthwiseNhwc, TheResidualFormIsATensConvAddAndActivation) {
  auto conv = depthwiseConv({32, 3, 1, 1, 1, 14, "relu"}, true, "add+relu");
  const at::Tensor x = at::randn({2, 32, 14, 14}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor r = at::randn({2, 32, 14, 14}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor want = conv->referenceAdd(x, r);
  EXPECT_LT(relError(conv->runAdd(x, r), want), 1e-5);
  at::Tensor mine = r.clone();
  EXPECT_LT(relError(conv->runAddInto(x, std::move(mine)), want), 1e-5);
}

TEST(DepthwiseNhwc, EveryVariantGivesTheBaselinesValuesOnAnyThreadCount) {
  const Case c{45, 3, 2, 1, 1, 19, "none"};
  at::manual_seed(11);
  const at::Tensor x = at::randn({1, c.size, c.size, c.channels}); // NHWC, as the kernel reads
  const at::Tensor w = at::randn({c.k * c.k, c.channels});
  const at::Tensor b = at::randn({c.channels});
  const std::int64_t o = (c.size + 2 * c.pad - c.k) / c.stride + 1;
  auto runWith = [&](const CpuKernels& t) {
    at::Tensor y = at::full({1, o, o, c.channels}, 7.0f);
    const Depthwise2d d{.h = c.size,
                        .w = c.size,
                        .c = c.channels,
                        .kh = c.k,
                        .kw = c.k,
                        .sh = c.stride,
                        .sw = c.stride,
                        .ph = c.pad,
                        .pw = c.pad,
                        .dh = 1,
                        .dw = 1,
                        .oh = o,
                        .ow = o,
                        .in = x.data_ptr<float>(),
                        .weight = w.data_ptr<float>(),
                        .bias = b.data_ptr<float>(),
                        .out = y.data_ptr<float>()};
    t.depthwiseRows(d, 0, o);
    return y;
  };
  const at::Tensor base = runWith(kernelsFor(Isa::Baseline));
  // The baseline against ATen's convolution of the same NHWC values.
  const at::Tensor ref =
      at::conv2d(x.permute({0, 3, 1, 2}), w.t().reshape({c.channels, 1, c.k, c.k}), b, {2, 2},
                 {1, 1}, {1, 1}, c.channels)
          .permute({0, 2, 3, 1});
  EXPECT_LT(relError(base, ref), 1e-5);
  for (const Isa isa : {Isa::Avx2, Isa::Avx512f}) {
    if (static_cast<int>(isa) > static_cast<int>(cpuIsa()))
      continue;
    EXPECT_LT(relError(runWith(kernelsFor(isa)), base), 1e-6) << isaName(isa);
  }
  // Rows split among threads: each output is one thread's sum, so any count gives one result.
  auto conv = depthwiseConv({64, 3, 1, 1, 1, 30, "none"}, true, "none");
  const at::Tensor xs = at::randn({2, 64, 30, 30}).contiguous(at::MemoryFormat::ChannelsLast);
  expectOneResultOnOneAndTwoThreads(*conv, xs);
}
