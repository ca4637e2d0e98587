// The blocked regions' ops (runtime/src/blocked_ops.cpp) on an empty batch: a model called with
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
