// Squeeze-and-excitation blocks of a packed region as one op (tspass::fuseSqueezeExcite,
// xalloc::squeeze_excite): found in the TinyCNN sample packed as the fast form writes it, with
// the outputs of the unfused ops; the op against ATen's own ops (pooling, convolutions,
// activations, mul) at NaN, infinity and overflow, at one and two threads, and where it hands
// the call to the original ops (another layout, gradients wanted); and the packed ops' thread
// choice by work.
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/fusions.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/value_compare.h"

#include "frozen_model.h"

using namespace xalloc;
using xalloc::runtime::PackedConv;
using xalloc::testing::countNodes;
using xalloc::testing::runGraph;

namespace {

struct Block {
  c10::intrusive_ptr<PackedConv> reduce, expand;
  at::Tensor w1, b1, w2, b2;
  std::string act1, act2;
};

Block makeBlock(std::int64_t c, std::int64_t r, const std::string& act1, const std::string& act2) {
  Block b;
  b.w1 = at::randn({r, c, 1, 1});
  b.b1 = at::randn({r});
  b.w2 = at::randn({c, r, 1, 1});
  b.b2 = at::randn({c});
  b.act1 = act1;
  b.act2 = act2;
  b.reduce = c10::make_intrusive<PackedConv>(b.w1, b.b1, std::vector<std::int64_t>{1, 1},
                                             std::vector<std::int64_t>{0, 0},
                                             std::vector<std::int64_t>{1, 1}, 1, act1);
  b.expand = c10::make_intrusive<PackedConv>(b.w2, b.b2, std::vector<std::int64_t>{1, 1},
                                             std::vector<std::int64_t>{0, 0},
                                             std::vector<std::int64_t>{1, 1}, 1, act2);
  return b;
}

at::Tensor act(const at::Tensor& y, const std::string& name) {
  if (name == "relu")
    return at::relu(y);
  if (name == "silu")
    return at::silu(y);
  if (name == "sigmoid")
    return at::sigmoid(y);
  return at::hardsigmoid(y);
}

// The block as the original model computes it, ATen's ops only.
at::Tensor atenBlock(const Block& b, const at::Tensor& x) {
  const at::Tensor p = at::adaptive_avg_pool2d(x, {1, 1});
  const at::Tensor s = act(at::conv2d(act(at::conv2d(p, b.w1, b.b1), b.act1), b.w2, b.b2), b.act2);
  return s * x;
}

// The TorchScript op, as a graph calls it; the stack holds a copy of the caller's handle, so x
// is never written.
at::Tensor fused(const Block& b, const at::Tensor& x) {
  static const auto op =
      torch::jit::findOperatorFor(c10::OperatorName("xalloc::squeeze_excite", ""));
  torch::jit::Stack stack{x, b.reduce, b.expand};
  op->getOperation()(stack);
  return stack.back().toTensor();
}

at::Tensor channelsLast(at::Tensor t) {
  return t.contiguous(at::MemoryFormat::ChannelsLast);
}

void expectClose(const at::Tensor& got, const at::Tensor& want) {
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-6, /*equal_nan=*/true))
      << "max difference " << (got - want).abs().nan_to_num(0, 0, 0).max().item<float>();
  EXPECT_TRUE(at::equal(got.isnan(), want.isnan()));
  EXPECT_TRUE(at::equal(got.isinf(), want.isinf()));
}

} // namespace

TEST(SqueezeExcite, APackedBlockBecomesOneOpWithTheUnfusedOutputs) {
  xalloc::testing::Frozen f = xalloc::testing::packedSample("tinycnn");
  const c10::IValue unfused = runGraph(f.graph, f.inputs);
  const std::size_t pools = countNodes(*f.graph, "aten::adaptive_avg_pool2d");
  const std::size_t convs = countNodes(*f.graph, "xalloc::conv2d_packed");
  ASSERT_EQ(tspass::fuseSqueezeExcite(*f.graph), 1) << tspass::graphText(*f.graph);
  EXPECT_EQ(countNodes(*f.graph, "xalloc::squeeze_excite"), 1u);
  EXPECT_EQ(countNodes(*f.graph, "aten::adaptive_avg_pool2d"), pools - 1) << "the head's stays";
  EXPECT_EQ(countNodes(*f.graph, "xalloc::conv2d_packed"), convs - 2);
  EXPECT_EQ(countNodes(*f.graph, "aten::mul"), 0u);
  const c10::IValue fused_out = runGraph(f.graph, f.inputs);
  EXPECT_LE(tspass::maxRelativeError(unfused, fused_out), 1e-5);
  EXPECT_EQ(tspass::fuseSqueezeExcite(*f.graph), 0) << "nothing more";
}

// The fusions run by name after a fast-form region (fusions.h), each reported with its count;
// one named off does not run.
TEST(SqueezeExcite, TheFusionsRunByNameAndOneSwitchedOffDoesNot) {
  std::set<std::string> names;
  for (const tspass::Fusion& f : tspass::fusions())
    EXPECT_TRUE(names.insert(f.name).second) << f.name << " twice";
  EXPECT_TRUE(tspass::findFusion("squeeze_excite"));
  EXPECT_FALSE(tspass::findFusion("squeeze-excite"));
  if (!runtime::hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  for (const bool off : {false, true}) {
    SCOPED_TRACE(off ? "squeeze_excite off" : "all on");
    xalloc::testing::Frozen f = xalloc::testing::frozenSample("tinycnn");
    const auto ranks = xalloc::testing::ranksOf(f);
    tspass::GraphIndex index(*f.graph);
    formats::Schedule s;
    for (const tspass::LayoutRegion& r : tspass::findLayoutRegions(*f.graph, ranks))
      if (r.rank == 4)
        s.decisions.push_back(xalloc::testing::regionDecision(r, index, "channels_last+packed"));
    ASSERT_FALSE(s.decisions.empty());
    std::set<std::string> switched_off;
    if (off)
      switched_off.insert("squeeze_excite");
    const tspass::ApplyReport r =
        tspass::applyRegionDecisions(*f.graph, s, ranks, true, true, switched_off);
    ASSERT_EQ(r.fusions.size(), tspass::fusions().size() - switched_off.size());
    std::map<std::string, std::int64_t> ran;
    for (const tspass::FusionRun& run : r.fusions)
      ran[run.name] = run.count;
    EXPECT_EQ(ran.count("squeeze_excite"), off ? 0u : 1u);
    EXPECT_EQ(ran["activation_arena"], 1);
    EXPECT_EQ(countNodes(*f.graph, "xalloc::squeeze_excite"), off ? 0u : 1u);
    EXPECT_EQ(ran["squeeze_excite"], off ? 0 : 1); // off: absent, read as 0
  }
}

TEST(SqueezeExcite, APooledValueSomethingElseReadsIsLeftAlone) {
  xalloc::testing::Frozen f = xalloc::testing::packedSample("tinycnn");
  torch::jit::Node* pool = nullptr;
  for (torch::jit::Node* n : f.graph->nodes())
    if (tspass::hasKind(n, "aten::adaptive_avg_pool2d") && !pool)
      pool = n; // the block's, before the head's
  ASSERT_TRUE(pool);
  f.graph->registerOutput(pool->output());
  EXPECT_EQ(tspass::fuseSqueezeExcite(*f.graph), 0);
}

TEST(SqueezeExcite, TheOpGivesATensOutputsAtNaNInfinityAndOverflow) {
  c10::NoGradGuard no_grad;
  for (const auto& [a1, a2] :
       {std::pair<const char*, const char*>{"relu", "hardsigmoid"}, {"silu", "sigmoid"}}) {
    SCOPED_TRACE(std::string(a1) + ", " + a2);
    const Block b = makeBlock(40, 10, a1, a2);
    at::Tensor x = channelsLast(at::randn({3, 40, 9, 11}));
    expectClose(fused(b, x), atenBlock(b, x));
    EXPECT_TRUE(fused(b, x).is_contiguous(at::MemoryFormat::ChannelsLast));
    x[0][3][2][5] = std::numeric_limits<float>::quiet_NaN();
    x[1][7][0][0] = std::numeric_limits<float>::infinity();
    x[2][7][1][1] = 3e38f; // with the next: a channel sum that overflows
    x[2][7][1][2] = 3e38f;
    const at::Tensor want = atenBlock(b, x);
    ASSERT_TRUE(want.isnan().any().item<bool>());
    expectClose(fused(b, x), want);
  }
}

// One pixel, one channel, weight 1 and bias 0: the mean is the value and the block's scale
// act2(act1(x)), so both activations meet the extremes themselves, as ATen's ops do.
TEST(SqueezeExcite, EachActivationMeetsTheExtremesAsAtensOp) {
  c10::NoGradGuard no_grad;
  const float inf = std::numeric_limits<float>::infinity();
  const auto conv = [](const char* a) {
    return c10::make_intrusive<PackedConv>(
        at::ones({1, 1, 1, 1}), at::zeros({1}), std::vector<std::int64_t>{1, 1},
        std::vector<std::int64_t>{0, 0}, std::vector<std::int64_t>{1, 1}, 1, a);
  };
  for (const auto& [a1, a2] : {std::pair<const char*, const char*>{"relu", "hardsigmoid"},
                               {"silu", "sigmoid"},
                               {"relu", "sigmoid"},
                               {"silu", "hardsigmoid"}}) {
    Block b;
    b.reduce = conv(a1);
    b.expand = conv(a2);
    for (float v : {3e38f, -3e38f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), -0.f, 0.f,
                    1e-3f, -2.9f, 3.f, -3.f, 6.f, -100.f, 100.f, 88.f, -88.f}) {
      SCOPED_TRACE(std::string(a1) + ", " + a2 + " at " + std::to_string(v));
      const at::Tensor x = at::full({1, 1, 1, 1}, v);
      const at::Tensor want = act(act(x, a1), a2) * x;
      const at::Tensor got = fused(b, x);
      EXPECT_EQ(got.isnan().item<bool>(), want.isnan().item<bool>());
      EXPECT_EQ(got.isinf().item<bool>(), want.isinf().item<bool>());
      EXPECT_TRUE(at::allclose(got, want, 1e-6, 0, /*equal_nan=*/true)) << got << want;
    }
  }
}

TEST(SqueezeExcite, AnyThreadCountGivesTheSameResult) {
  c10::NoGradGuard no_grad;
  const int threads = at::get_num_threads();
  const Block b = makeBlock(64, 16, "relu", "hardsigmoid");
  const at::Tensor x = channelsLast(at::randn({1, 64, 96, 96})); // a split at two threads
  at::set_num_threads(1);
  const at::Tensor one = fused(b, x);
  at::set_num_threads(2);
  const at::Tensor two = fused(b, x);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(one, two));
  expectClose(one, atenBlock(b, x));
}

// An input passed at its last use (the only handle of its tensor and storage) is scaled in
// place; one held anywhere else keeps its values. The same result either way.
TEST(SqueezeExcite, AnInputAtItsLastUseIsScaledInPlace) {
  c10::NoGradGuard no_grad;
  const Block b = makeBlock(40, 10, "silu", "sigmoid");
  const at::Tensor x = channelsLast(at::randn({1, 40, 20, 20}));
  const at::Tensor want = fused(b, x);
  at::Tensor alone = x.clone();
  const void* p = alone.data_ptr();
  const at::Tensor into = runtime::squeezeExciteInto(std::move(alone), b.reduce, b.expand);
  EXPECT_EQ(into.data_ptr(), p) << "an input no one holds was copied";
  EXPECT_TRUE(at::equal(into, want));
  at::Tensor kept = x.clone();
  at::Tensor handle = kept;
  const at::Tensor copied = runtime::squeezeExciteInto(std::move(handle), b.reduce, b.expand);
  EXPECT_NE(copied.data_ptr(), kept.data_ptr());
  EXPECT_TRUE(at::equal(kept, x)) << "an input the caller holds was written";
  EXPECT_TRUE(at::equal(copied, want));
  EXPECT_TRUE(at::equal(fused(b, x), want)); // and the op through a stack leaves x alone
}

TEST(SqueezeExcite, OtherInputsGetTheOriginalOps) {
  const Block b = makeBlock(24, 6, "relu", "hardsigmoid");
  const at::Tensor x = at::randn({2, 24, 7, 7}); // row-major: the original ops
  {
    c10::NoGradGuard no_grad;
    const at::Tensor unfused = x * b.expand->run(b.reduce->run(at::adaptive_avg_pool2d(x, {1, 1})));
    EXPECT_TRUE(at::equal(fused(b, x), unfused));
    EXPECT_TRUE(at::equal(fused(b, x.index({at::indexing::Slice(0, 0)})),
                          atenBlock(b, x.index({at::indexing::Slice(0, 0)}))))
        << "an empty batch";
  }
  // Gradients wanted: ATen's ops record them (the packed convolutions run ATen's).
  const at::Tensor a = channelsLast(x).requires_grad_(true);
  const at::Tensor c = x.clone().requires_grad_(true);
  fused(b, a).sum().backward();
  atenBlock(b, c).sum().backward();
  ASSERT_TRUE(a.grad().defined());
  EXPECT_TRUE(at::allclose(a.grad(), c.grad(), 1e-5, 1e-6));
  // A scale whose channels do not match: ATen's broadcast error.
  c10::NoGradGuard no_grad;
  EXPECT_THROW(
      fused(makeBlock(24, 6, "relu", "hardsigmoid"), channelsLast(at::randn({1, 12, 4, 4}))),
      std::exception);
}

TEST(SqueezeExcite, PackedOpsRunOnThreadsTheirWorkPays) {
  EXPECT_EQ(runtime::packedThreads(128, 2), 1) << "a 1x1 convolution of one pixel";
  EXPECT_EQ(runtime::packedThreads(1e6, 2), 2);
  EXPECT_EQ(runtime::packedThreads(1e6, 16), 6);
  EXPECT_EQ(runtime::packedThreads(1e9, 1), 1);
  EXPECT_EQ(runtime::packedThreads(1e9, 0), 1) << "at least one";
  setenv("XALLOC_PACKED_WORK_PER_THREAD", "0", 1);
  EXPECT_EQ(runtime::packedThreads(128, 2), 2) << "0: every thread";
  setenv("XALLOC_PACKED_WORK_PER_THREAD", "ten", 1);
  EXPECT_THROW(runtime::packedThreads(128, 2), c10::Error);
  unsetenv("XALLOC_PACKED_WORK_PER_THREAD");
  // The thread count a shape runs on does not change its result.
  c10::NoGradGuard no_grad;
  const int threads = at::get_num_threads();
  PackedConv conv(at::randn({64, 32, 3, 3}), at::randn({64}), {1, 1}, {1, 1}, {1, 1}, 1, "relu");
  const at::Tensor x = channelsLast(at::randn({1, 32, 40, 40}));
  at::set_num_threads(1);
  const at::Tensor one = conv.run(x);
  at::set_num_threads(2);
  const at::Tensor two = conv.run(x);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(one, two));
}
