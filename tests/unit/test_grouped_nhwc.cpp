// Grouped convolutions run by the runtime's own kernel (grouped_nhwc.cpp), as the packed
// convolutions call it: ATen's values within a rounding per term at every group width, kernel,
// stride, padding and dilation; NaN and infinity where ATen's are; the residual form; each CPU
// variant against the baseline, on any thread count.
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "xalloc/runtime/packed.h"

#include "../../runtime/kernels/dispatch.h"
#include "../../runtime/kernels/grouped_nhwc.h"
#include "packed_cases.h"

using namespace xalloc::runtime;
using namespace xalloc::testing;

namespace {

struct Case {
  std::int64_t groups, in_per_group, out_per_group, k, stride, pad, dilation, size;
  const char* post;
};

c10::intrusive_ptr<PackedConv> groupedConv(const Case& c, bool bias, const std::string& post_op) {
  at::manual_seed(5);
  const at::Tensor w = at::randn({c.groups * c.out_per_group, c.in_per_group, c.k, c.k}).mul(0.2);
  c10::optional<at::Tensor> b;
  if (bias)
    b = at::randn({c.groups * c.out_per_group});
  return c10::make_intrusive<PackedConv>(
      w, b, std::vector<std::int64_t>{c.stride, c.stride}, std::vector<std::int64_t>{c.pad, c.pad},
      std::vector<std::int64_t>{c.dilation, c.dilation}, c.groups, post_op);
}

// RegNetY-400MF's (8 a group), wider and uneven groups, 1x1 and 5x5, strides and dilations,
// and first convolutions of RGB pixels (MobileNetV3's 3->16, a 7x7 stride 2).
const Case kCases[] = {
    {6, 8, 8, 3, 1, 1, 1, 28, "relu"},      {13, 8, 8, 3, 2, 1, 1, 15, "none"},
    {4, 16, 16, 3, 1, 1, 1, 9, "silu"},     {3, 5, 24, 3, 1, 2, 2, 11, "relu6"},
    {2, 12, 8, 1, 1, 0, 1, 7, "hardswish"}, {5, 8, 16, 5, 2, 2, 1, 13, "sigmoid"},
    {8, 1, 8, 3, 1, 1, 1, 10, "gelu"},      {55, 8, 8, 3, 1, 1, 1, 7, "relu"}};

} // namespace

TEST(GroupedNhwc, PackedGroupedConvolutionsAreATens) {
  for (const Case& c : kCases)
    for (const bool bias : {true, false})
      for (const std::int64_t batch : {1, 2}) {
        ASSERT_TRUE(groupedNhwcTakes(c.groups, c.in_per_group, c.out_per_group));
        auto conv = groupedConv(c, bias, c.post);
        const at::Tensor x = at::randn({batch, c.groups * c.in_per_group, c.size, c.size + 2})
                                 .contiguous(at::MemoryFormat::ChannelsLast);
        const at::Tensor got = conv->run(x), ref = conv->reference(x);
        ASSERT_EQ(got.sizes(), ref.sizes());
        EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
        EXPECT_LT(relError(got, ref), 1e-5)
            << c.groups << " groups of " << c.in_per_group << "->" << c.out_per_group << ", kernel "
            << c.k << ", stride " << c.stride << ", pad " << c.pad << ", dilation " << c.dilation
            << ", " << c.post << ", bias " << bias << ", batch " << batch;
      }
  // Groups of fewer than eight outputs, and depthwise ones, are not the kernel's.
  EXPECT_FALSE(groupedNhwcTakes(32, 4, 4));
  EXPECT_FALSE(groupedNhwcTakes(1, 8, 8)); // a dense one of more than four inputs
  EXPECT_FALSE(groupedNhwcTakes(1, 3, 12));
  EXPECT_FALSE(groupedNhwcTakes(16, 1, 1));
  // A row-major input is read as ATen reads it.
  auto conv = groupedConv(kCases[0], true, "relu");
  const at::Tensor x = at::randn({1, 48, 10, 11});
  EXPECT_LT(relError(conv->run(x), conv->reference(x)), 1e-5);
}

TEST(GroupedNhwc, NaNAndInfinityComeOutWhereATensDo) {
  for (const char* post : {"none", "relu", "silu"}) {
    auto conv = groupedConv({4, 8, 8, 3, 1, 1, 1, 8, post}, true, post);
    at::Tensor x = at::randn({1, 32, 8, 8}).contiguous(at::MemoryFormat::ChannelsLast);
    x.index_put_({0, 3, 2, 2}, NAN);
    x.index_put_({0, 17, 5, 6}, INFINITY);
    x.index_put_({0, 20, 0, 7}, -INFINITY);
    const at::Tensor got = conv->run(x), ref = conv->reference(x);
    EXPECT_TRUE(at::equal(at::isinf(got), at::isinf(ref))) << post;
    expectSameNonFinite(got, ref, post);
  }
}

TEST(GroupedNhwc, TheResidualFormIsATensConvAddAndActivation) {
  auto conv = groupedConv({4, 8, 8, 3, 1, 1, 1, 14, "relu"}, true, "add+relu");
  const at::Tensor x = at::randn({2, 32, 14, 14}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor r = at::randn({2, 32, 14, 14}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor want = conv->referenceAdd(x, r);
  EXPECT_LT(relError(conv->runAdd(x, r), want), 1e-5);
  at::Tensor mine = r.clone();
  EXPECT_LT(relError(conv->runAddInto(x, std::move(mine)), want), 1e-5);
}

TEST(GroupedNhwc, EveryVariantGivesTheBaselinesValuesOnAnyThreadCount) {
  const Case c{3, 8, 16, 3, 2, 1, 1, 19, "none"};
  at::manual_seed(11);
  const std::int64_t cin = c.groups * c.in_per_group, cout = c.groups * c.out_per_group;
  const at::Tensor x = at::randn({1, c.size, c.size, cin}); // NHWC, as the kernel reads
  const at::Tensor w = at::randn({cout, c.in_per_group, c.k, c.k});
  const at::Tensor wk = groupedNhwcWeight(w, c.groups);
  const at::Tensor b = at::randn({cout});
  const std::int64_t o = (c.size + 2 * c.pad - c.k) / c.stride + 1;
  auto runWith = [&](const CpuKernels& t) {
    at::Tensor y = at::full({1, o, o, cout}, 7.0f);
    const Grouped2d g{.h = c.size,
                      .w = c.size,
                      .groups = c.groups,
                      .ci = c.in_per_group,
                      .co = c.out_per_group,
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
                      .weight = wk.data_ptr<float>(),
                      .bias = b.data_ptr<float>(),
                      .out = y.data_ptr<float>()};
    t.groupedRows(g, 0, o);
    return y;
  };
  const at::Tensor base = runWith(kernelsFor(Isa::Baseline));
  const at::Tensor ref = at::conv2d(x.permute({0, 3, 1, 2}), w, b, {2, 2}, {1, 1}, {1, 1}, c.groups)
                             .permute({0, 2, 3, 1});
  EXPECT_LT(relError(base, ref), 1e-5);
  for (const Isa isa : {Isa::Avx2, Isa::Avx512f}) {
    if (static_cast<int>(isa) > static_cast<int>(cpuIsa()))
      continue;
    EXPECT_LT(relError(runWith(kernelsFor(isa)), base), 1e-6) << isaName(isa);
  }
  // Rows split among threads: each output is one thread's sum, so any count gives one result.
  auto conv = groupedConv({6, 8, 8, 3, 1, 1, 1, 30, "none"}, true, "none");
  const at::Tensor xs = at::randn({2, 48, 30, 30}).contiguous(at::MemoryFormat::ChannelsLast);
  expectOneResultOnOneAndTwoThreads(*conv, xs);
}
