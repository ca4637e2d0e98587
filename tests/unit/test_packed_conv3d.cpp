// 3-D packed convolutions (xalloc::conv3d_packed, conv3d_packed_add) keep the op contract the 2-D
// ones keep (packed.h, docs/runtime-ops.md): ATen's conv3d within rounding for the kernels video
// models have (3x3x3, a (2+1)-D pair, pointwise, grouped, strided, dilated), the activation and a
// residual fused; NaN where ATen's; gradients ATen's; unbatched inputs; calls from many threads;
// bad arguments refused; and the op of the other rank refused by name.
#include <atomic>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include "xalloc/runtime/packed.h"

#include "../../runtime/kernels/channels_last.h"

using namespace xalloc::runtime;

namespace {

struct Conv3dCase {
  const char* name;
  std::int64_t in, out;
  std::vector<std::int64_t> k, stride, pad, dil;
  std::int64_t groups;
  const char* post;
};

// What R3D, R(2+1)D and MC3 have, and the other parameters ATen takes.
const Conv3dCase kCases[] = {
    {"stem 3x7x7 /1,2,2", 3, 16, {3, 7, 7}, {1, 2, 2}, {1, 3, 3}, {1, 1, 1}, 1, "relu"},
    {"dense 3x3x3", 16, 24, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, "relu"},
    {"spatial 1x3x3 /1,2,2", 16, 24, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {1, 1, 1}, 1, "none"},
    {"temporal 3x1x1 /2", 24, 16, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 1, 1}, 1, "relu6"},
    {"pointwise", 16, 32, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1, "hardswish"},
    {"depthwise 3x3x3", 16, 16, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 16, "silu"},
    {"grouped, dilated 2", 16, 32, {3, 3, 3}, {1, 1, 1}, {2, 2, 2}, {2, 2, 2}, 4, "sigmoid"},
};

c10::intrusive_ptr<PackedConv> make(const Conv3dCase& c, const std::string& post,
                                    bool bias = true) {
  at::manual_seed(7);
  at::Tensor w = at::randn({c.out, c.in / c.groups, c.k[0], c.k[1], c.k[2]}).mul(0.2);
  c10::optional<at::Tensor> b;
  if (bias)
    b = at::randn({c.out});
  return c10::make_intrusive<PackedConv>(w, b, c.stride, c.pad, c.dil, c.groups, post);
}

double relError(const at::Tensor& a, const at::Tensor& ref) {
  return (a - ref).abs().max().item<double>() / ref.abs().max().item<double>();
}

} // namespace

TEST(PackedConv3d, IsATensConv3dWithinRounding) {
  if (!hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  for (const auto& c : kCases)
    for (bool bias : {true, false}) {
      auto op = make(c, c.post, bias);
      EXPECT_EQ(op->spatialDims(), 3);
      for (const at::Tensor& x :
           {at::randn({1, c.in, 8, 28, 28}), at::randn({2, c.in, 5, 9, 11}),
            at::randn({1, c.in, 8, 14, 14}).contiguous(at::MemoryFormat::ChannelsLast3d)}) {
        const at::Tensor got = op->run(x);
        const at::Tensor ref = op->reference(x);
        ASSERT_EQ(got.sizes(), ref.sizes()) << c.name;
        EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast3d)) << c.name;
        EXPECT_LT(relError(got, ref), 1e-5)
            << c.name << (bias ? "" : ", no bias") << " at " << x.sizes();
      }
      // Unbatched, as ATen takes it: C, D, H, W.
      const at::Tensor x = at::randn({c.in, 6, 10, 10});
      const at::Tensor got = op->run(x);
      EXPECT_EQ(got.dim(), 4) << c.name;
      EXPECT_LT(relError(got, op->reference(x)), 1e-5) << c.name << ", unbatched";
    }
}

TEST(PackedConv3d, ResidualAddsAreATensConvAddAndActivation) {
  if (!hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  const Conv3dCase& c = kCases[1];
  for (const char* post : {"add", "add+relu"}) {
    auto op = make(c, post);
    const at::Tensor x = at::randn({1, c.in, 8, 14, 14});
    for (const at::Tensor& r :
         {at::randn({1, c.out, 8, 14, 14}),
          at::randn({1, c.out, 8, 14, 14}).contiguous(at::MemoryFormat::ChannelsLast3d),
          at::randn({c.out, 1, 1, 1})}) { // broadcast: ATen's
      const at::Tensor got = op->runAdd(x, r);
      const at::Tensor ref = op->referenceAdd(x, r);
      ASSERT_EQ(got.sizes(), ref.sizes()) << post;
      EXPECT_LT(relError(got, ref), 1e-5) << post << ", residual " << r.sizes();
    }
    EXPECT_THROW(op->run(x), c10::Error) << "a residual op called without its residual";
  }
  EXPECT_THROW(make(c, "relu")->runAdd(at::randn({1, c.in, 4, 6, 6}), at::randn({1})), c10::Error);
}

TEST(PackedConv3d, NanAndInfinityComeOutWhereATensDo) {
  if (!hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  for (const char* post : {"relu", "relu6", "none", "silu"}) {
    auto op = make(kCases[1], post);
    at::Tensor x = at::randn({1, 16, 4, 8, 8});
    x.index_put_({0, 3, 1, 2, 2}, NAN);
    x.index_put_({0, 5, 2, 6, 1}, INFINITY);
    const at::Tensor got = op->run(x);
    const at::Tensor ref = op->reference(x);
    EXPECT_TRUE(at::equal(at::isnan(got), at::isnan(ref))) << post << ": NaN in other places";
    EXPECT_TRUE(at::equal(at::isinf(got), at::isinf(ref))) << post << ": inf in other places";
    EXPECT_GT(at::logical_not(at::isfinite(ref)).sum().item<std::int64_t>(), 0) << post;
  }
  // So large that a reordered sum could overflow where ATen's does not: ATen's result.
  auto op = make(kCases[1], "relu");
  const at::Tensor big = at::randn({1, 16, 4, 8, 8}).mul(3e37);
  const at::Tensor got = op->run(big), ref = op->reference(big);
  EXPECT_TRUE(at::equal(at::isfinite(got), at::isfinite(ref)));
}

TEST(PackedConv3d, GradientsAreATens) {
  if (!hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  auto op = make(kCases[1], "relu");
  const at::Tensor x = at::randn({1, 16, 4, 8, 8}).requires_grad_();
  const at::Tensor y = op->run(x);
  ASSERT_TRUE(y.requires_grad()) << "the output carries ATen's history";
  y.sum().backward();
  const at::Tensor g = x.grad().clone();
  x.grad().zero_();
  op->reference(x).sum().backward();
  EXPECT_TRUE(at::allclose(g, x.grad(), 1e-5, 1e-6));
}

TEST(PackedConv3d, ManyThreadsOnOneOpGiveOneThreadsResults) {
  if (!hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  auto op = make(kCases[1], "relu");
  std::vector<at::Tensor> xs, refs;
  for (std::int64_t d : {4, 6, 4, 8}) {
    xs.push_back(at::randn({1, 16, d, 12, 12}));
    refs.push_back(op->reference(xs.back()));
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < xs.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i)
        if (relError(op->run(xs[t]), refs[t]) > 1e-5)
          ++wrong;
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(PackedConv3d, BadArgumentsAndInputsAreRefused) {
  const std::vector<std::int64_t> one{1, 1, 1}, zero{0, 0, 0};
  auto w = at::randn({8, 4, 3, 3, 3});
  EXPECT_THROW(PackedConv(w, c10::nullopt, {1, 1}, {0, 0}, {1, 1}, 1, "relu"), c10::Error)
      << "two strides for a 3-D weight";
  EXPECT_THROW(PackedConv(w, c10::nullopt, {1, 0, 1}, zero, one, 1, "relu"), c10::Error);
  EXPECT_THROW(PackedConv(w, c10::nullopt, one, {0, -1, 0}, one, 1, "relu"), c10::Error);
  EXPECT_THROW(PackedConv(w, c10::nullopt, one, zero, one, 3, "relu"), c10::Error)
      << "groups that do not divide the outputs";
  EXPECT_THROW(PackedConv(at::randn({8, 4, 3, 3, 3, 3}), c10::nullopt, one, zero, one, 1, "relu"),
               c10::Error);
  EXPECT_THROW(PackedConv(at::randn({8, 0, 3, 3, 3}), c10::nullopt, one, zero, one, 1, "relu"),
               c10::Error);
  EXPECT_THROW(PackedConv(w, at::randn({7}), one, zero, one, 1, "relu"), c10::Error);
  if (!hasPackedConv())
    return;
  PackedConv op(w, c10::nullopt, one, zero, one, 1, "relu");
  EXPECT_THROW(op.run(at::randn({1, 4, 8, 8})), c10::Error) << "a 4-D input is unbatched: 4 != 8";
  EXPECT_THROW(op.run(at::randn({1, 5, 4, 8, 8})), c10::Error) << "wrong channels";
  EXPECT_THROW(op.run(at::randn({1, 4, 2, 8, 8})), c10::Error) << "kernel deeper than the input";
  EXPECT_THROW(op.run(at::randn({1, 4, 4, 8, 8}, at::kDouble)), c10::Error);
  EXPECT_EQ(op.run(at::randn({0, 4, 4, 8, 8})).sizes(), (at::IntArrayRef{0, 8, 2, 6, 6}));
  EXPECT_THROW(op.checkCalledAs(2, false), c10::Error) << "conv2d_packed on a 3-D convolution";
  EXPECT_NO_THROW(op.checkCalledAs(3, false));
}

TEST(PackedConv3d, TheOpsAreRegisteredAndRefuseTheOtherRank) {
  if (!hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  auto op3 = make(kCases[1], "relu");
  auto op2 = c10::make_intrusive<PackedConv>(
      at::randn({8, 4, 3, 3}), c10::nullopt, std::vector<std::int64_t>{1, 1},
      std::vector<std::int64_t>{1, 1}, std::vector<std::int64_t>{1, 1}, 1, "none");
  auto run = [](const char* op, const at::Tensor& x, const c10::intrusive_ptr<PackedConv>& w) {
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(op, "");
    return handle.typed<at::Tensor(const at::Tensor&, const c10::intrusive_ptr<PackedConv>&)>()
        .call(x, w);
  };
  const at::Tensor x3 = at::randn({1, 16, 4, 8, 8});
  EXPECT_LT(relError(run("xalloc::conv3d_packed", x3, op3), op3->reference(x3)), 1e-5);
  EXPECT_THROW(run("xalloc::conv2d_packed", x3, op3), c10::Error);
  EXPECT_THROW(run("xalloc::conv3d_packed", at::randn({1, 4, 8, 8}), op2), c10::Error);
}

TEST(PackedConv3d, NcdhwBecomesNdhwcAsATensCopy) {
  for (std::int64_t c : {3, 16, 5})
    for (const auto& sizes :
         {std::vector<std::int64_t>{1, c, 8, 112, 112}, std::vector<std::int64_t>{2, c, 3, 7, 9}}) {
      const at::Tensor x = at::randn(sizes);
      const at::Tensor got = toChannelsLast(x);
      EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast3d)) << c;
      EXPECT_TRUE(at::equal(got, x)) << c << " channels";
    }
}
