// The blocked regions' ops (runtime/kernels/blocked_ops.cpp) on an empty batch: a model called with
// no images gives an empty result, as the original does, not an error from reading an MKLDNN
// buffer that an empty tensor does not have.
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include "xalloc/runtime/async.h"

namespace {

at::Tensor call(const std::string& name, std::vector<c10::IValue> args) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "");
  torch::jit::Stack stack(std::move(args));
  op.callBoxed(stack);
  return stack.back().toTensor();
}

} // namespace

TEST(BlockedOps, AnEmptyBatchGivesAnEmptyResult) {
  xalloc::runtime::loadOps();
  for (const std::vector<std::int64_t>& sizes :
       {std::vector<std::int64_t>{0, 20, 8, 8}, std::vector<std::int64_t>{0, 16, 3, 8, 8}}) {
    const at::Tensor blocked = call("xalloc::to_blocked", {at::randn(sizes)});
    ASSERT_TRUE(blocked.is_mkldnn());
    for (const std::string op : {"relu", "hardswish", "hardsigmoid", "relu6"})
      for (const bool in_place : {false, true}) {
        const std::string name = "xalloc::blocked_" + op + (in_place ? "_" : "");
        at::Tensor got;
        ASSERT_NO_THROW(got = call(name, {blocked.clone()})) << name;
        EXPECT_EQ(got.to_dense().sizes(), at::IntArrayRef(sizes)) << name;
      }
    if (sizes.size() == 4) {
      const at::Tensor pooled =
          call("xalloc::blocked_max_pool2d",
               {blocked, std::vector<std::int64_t>{3, 3}, std::vector<std::int64_t>{2, 2},
                std::vector<std::int64_t>{1, 1}, std::vector<std::int64_t>{1, 1}, false});
      EXPECT_EQ(pooled.to_dense().sizes(),
                at::max_pool2d(at::randn(sizes), {3, 3}, {2, 2}, {1, 1}).sizes());
    }
  }
}

// 3-D max pooling on blocked tensors (S3D's, 56% of the rewritten model when it ran densely):
// oneDNN's where it lies, ATen's result bit for bit; with a NaN in the input, or dilated (which
// oneDNN refuses), ATen's dense pooling: the NaN where ATen puts it.
TEST(BlockedOps, ThreeDMaxPoolingIsAtensBitForBit) {
  xalloc::runtime::loadOps();
  using V = std::vector<std::int64_t>;
  struct Case {
    V sizes, kernel, stride, padding, dilation;
    bool ceil;
  };
  const std::vector<Case> cases{
      {{1, 20, 4, 15, 15}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {1, 1, 1}, false},
      {{2, 16, 5, 9, 9}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, false},
      {{1, 33, 5, 7, 7}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, true},
      {{1, 16, 4, 8, 8}, {2, 2, 2}, {}, {0, 0, 0}, {1, 1, 1}, false},
      {{1, 16, 6, 9, 9}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {2, 2, 2}, false},
  };
  for (const Case& c : cases) {
    for (const bool with_nan : {false, true}) {
      at::Tensor x = at::randn(c.sizes);
      if (with_nan)
        x.view({-1})[7] = NAN;
      const at::Tensor want = at::max_pool3d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil);
      const at::Tensor blocked = call("xalloc::to_blocked", {x});
      const at::Tensor got = call("xalloc::blocked_max_pool3d",
                                  {blocked, c.kernel, c.stride, c.padding, c.dilation, c.ceil});
      ASSERT_TRUE(got.is_mkldnn());
      const at::Tensor dense = got.to_dense();
      ASSERT_EQ(dense.sizes(), want.sizes()) << c.sizes;
      EXPECT_TRUE(at::equal(dense.isnan(), want.isnan())) << c.sizes << " nan " << with_nan;
      EXPECT_TRUE(at::equal(at::nan_to_num(dense), at::nan_to_num(want)))
          << c.sizes << " nan " << with_nan;
      if (with_nan) {
        EXPECT_TRUE(dense.isnan().any().item<bool>());
      }
    }
  }
  // The 2-D pooling shares the rule: dilated (which libtorch's MKLDNN pooling refuses), ATen's.
  const at::Tensor x2 = at::randn({1, 16, 9, 9});
  const at::Tensor pooled2 =
      call("xalloc::blocked_max_pool2d",
           {call("xalloc::to_blocked", {x2}), V{2, 2}, V{1, 1}, V{1, 1}, V{2, 2}, false});
  EXPECT_TRUE(at::equal(pooled2.to_dense(), at::max_pool2d(x2, {2, 2}, {1, 1}, {1, 1}, {2, 2})));
  // An empty batch: an empty result.
  const at::Tensor empty = call("xalloc::to_blocked", {at::randn({0, 16, 3, 8, 8})});
  const at::Tensor pooled = call("xalloc::blocked_max_pool3d",
                                 {empty, V{2, 2, 2}, V{2, 2, 2}, V{0, 0, 0}, V{1, 1, 1}, false});
  EXPECT_EQ(pooled.to_dense().sizes(), at::IntArrayRef({0, 16, 1, 4, 4}));
}
