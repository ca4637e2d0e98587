// The blocked regions' ops keep the op contract (runtime/kernels/blocked_ops.cpp,
// docs/runtime-ops.md): relu (in place and not) and max pooling keep NaN where libtorch's MKLDNN
// forms drop it, the activations are ATen's on channels padded to the block, and the region's
// entry refuses an input that wants gradients.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include "xalloc/runtime/packed.h"

#include "../../runtime/kernels/blocked_ops.h"

using namespace xalloc::runtime;

namespace {
std::vector<c10::IValue> runIr(const std::string& ir, std::vector<c10::IValue> inputs) {
  auto g = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(ir, g.get());
  torch::jit::GraphExecutor exec(g, "test");
  exec.run(inputs);
  return inputs;
}
} // namespace

// The blocked regions' relu (in place and not) and max pooling keep NaN where libtorch's MKLDNN
// forms drop it; the region entry refuses an input that wants gradients.
TEST(PackedOps, BlockedReluAndMaxPoolKeepNaN) {
  ASSERT_TRUE(hasPackedConv()); // the runtime's ops are registered (linked in, or loaded)
  // An MKLDNN convolution's output is in oneDNN's blocked layout, with padded lanes (20 channels).
  at::Tensor x = at::randn({1, 8, 10, 10});
  at::Tensor w = at::randn({20, 8, 3, 3}).mul(0.3);
  at::Tensor dense = at::conv2d(x, w, {}, 1, 1);
  dense.index_put_({0, 3, 4, 4}, NAN);
  dense.index_put_({0, 17, 2, 2}, -INFINITY);
  const auto out = runIr(R"IR(
graph(%d : Tensor):
  %none : NoneType = prim::Constant()
  %k : int[] = prim::Constant[value=[3, 3]]()
  %s : int[] = prim::Constant[value=[1, 1]]()
  %p : int[] = prim::Constant[value=[1, 1]]()
  %f : bool = prim::Constant[value=0]()
  %m : Tensor = xalloc::to_blocked(%d)
  %r : Tensor = xalloc::blocked_relu(%m)
  %pool : Tensor = xalloc::blocked_max_pool2d(%m, %k, %s, %p, %s, %f)
  %c : Tensor = aten::clone(%m, %none)
  %r2 : Tensor = xalloc::blocked_relu_(%c)
  %a : Tensor = aten::to_dense(%r, %none, %none)
  %b : Tensor = aten::to_dense(%pool, %none, %none)
  %e : Tensor = aten::to_dense(%r2, %none, %none)
  return (%a, %b, %e))IR",
                         {dense});
  EXPECT_TRUE(at::equal(at::isnan(out[0].toTensor()), at::isnan(at::relu(dense))));
  EXPECT_TRUE(at::allclose(out[0].toTensor(), at::relu(dense), 0, 0, /*equal_nan=*/true));
  EXPECT_TRUE(at::allclose(out[2].toTensor(), at::relu(dense), 0, 0, true));
  const at::Tensor pool_ref = at::max_pool2d(dense, {3, 3}, {1, 1}, {1, 1});
  EXPECT_TRUE(at::equal(at::isnan(out[1].toTensor()), at::isnan(pool_ref)));
  EXPECT_TRUE(at::allclose(out[1].toTensor(), pool_ref, 0, 0, true));
  // libtorch's own MKLDNN relu is what these replace: it drops the NaN.
  EXPECT_FALSE(at::isnan(at::relu(dense.to_mkldnn()).to_dense()).any().item<bool>());
  // The entry refuses an input that wants gradients, in one line.
  try {
    runIr(R"IR(
graph(%d : Tensor):
  %m : Tensor = xalloc::to_blocked(%d)
  return (%m))IR",
          {at::randn({1, 4, 4, 4}).requires_grad_()});
    ADD_FAILURE() << "a blocked region took an input that wants gradients";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("rewritten for inference"), std::string::npos);
  }
}

// libtorch 1.13's out-of-place MKLDNN hard swish, hard sigmoid and relu6 are wrong when the
// channels are not a multiple of the block (120 of 128: off by 28): the runtime's forms are
// ATen's, in place and not, and leave the padded lanes zero.
TEST(PackedOps, BlockedActivationsOnPaddedChannelsAreATens) {
  ASSERT_TRUE(hasPackedConv()); // the runtime's ops are registered (linked in, or loaded)
  // 4-D (nChw16c) and 5-D (a video model's nCdhw16c) outputs of oneDNN's convolution.
  for (const int rank : {4, 5})
    for (std::int64_t channels : {120, 20, 32}) {
      std::vector<std::int64_t> xs{2, 8, 9, 9}, ws{channels, 8, 3, 3};
      if (rank == 5) {
        xs.insert(xs.begin() + 2, 3);
        ws.push_back(3);
      }
      const std::vector<std::int64_t> ones(rank - 2, 1);
      at::Tensor x = at::randn(xs);
      at::Tensor w = at::randn(ws).mul(0.3);
      const at::Tensor dense = rank == 4 ? at::conv2d(x, w, {}, 1, 1) : at::conv3d(x, w, {}, 1, 1);
      const at::Tensor blocked =
          at::mkldnn_convolution(x.to_mkldnn(), w.to_mkldnn(), {}, ones, ones, ones, 1);
      for (const std::string op : {"hardswish", "hardsigmoid", "relu6", "relu"}) {
        for (const bool in_place : {false, true}) {
          const std::string name = "xalloc::blocked_" + op + (in_place ? "_" : "");
          const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "");
          at::Tensor input = blocked.clone();
          torch::jit::Stack stack{input};
          handle.callBoxed(stack);
          const at::Tensor got = stack.back().toTensor();
          const at::Tensor ref = op == "hardswish"     ? at::hardswish(dense)
                                 : op == "hardsigmoid" ? at::hardsigmoid(dense)
                                 : op == "relu6"       ? at::hardtanh(dense, 0, 6)
                                                       : at::relu(dense);
          EXPECT_LT((got.to_dense() - ref).abs().max().item<double>(), 1e-5)
              << name << " on " << channels << " channels, " << rank << "-D";
          const auto b = xalloc::runtime::detail::mkldnnBuffer(got, "test");
          if (b.pad_lanes > 0) {
            ASSERT_GE(b.pad_offset, 0) << channels;
            ASSERT_EQ(b.pad_sizes.size(), static_cast<std::size_t>(rank - 1));
            std::vector<std::int64_t> sizes = b.pad_sizes, strides = b.pad_strides;
            sizes.push_back(b.pad_lanes);
            strides.push_back(1);
            at::Tensor pad = at::from_blob(b.data, {b.elements}, at::kFloat)
                                 .as_strided(sizes, strides, b.pad_offset);
            EXPECT_EQ(pad.abs().max().item<double>(), 0.0) << name << ": padded lanes not zero";
          }
        }
      }
    }
}
