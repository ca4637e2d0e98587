// The async conversion runtime: the blocked transpose is bit-identical to ATen on random
// layouts and on every path of the kernel, conversions in flight keep their inputs alive, many run
// at once, errors reach the waiter, and the TorchScript op runs in a scripted graph.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/frontend/ir_emitter.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include "xalloc/runtime/async.h"

#include "xalloc/runtime/env_count.h"
#include "xalloc/runtime/install.h"
#include "xalloc/runtime/output_alloc.h"
#include "xalloc/scheduler/decide.h"

using namespace xalloc::runtime;

// xsched plans the fast form knowing which outputs the runtime maps once and reuses.
static_assert(xalloc::scheduler::kFastFormReusedOutputBytes ==
              static_cast<std::int64_t>(kHugePageOutputBytes));

namespace {
bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && a.is_contiguous() &&
         b.is_contiguous() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<std::size_t>(a.nbytes())) == 0;
}
} // namespace

TEST(Async, BlockedTransposeMatchesATenBitForBit) {
  std::mt19937_64 rng(7);
  int fast = 0;
  for (int i = 0; i < 300; ++i) {
    const std::vector<c10::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kHalf,
                                                 at::kByte,  at::kLong,   at::kBFloat16};
    const auto dtype = dtypes[rng() % dtypes.size()];
    const int rank = 2 + static_cast<int>(rng() % 3);
    std::vector<std::int64_t> shape;
    for (int d = 0; d < rank; ++d)
      shape.push_back(1 + static_cast<std::int64_t>(rng() % 70));
    at::Tensor base = at::randn(shape).mul(100).to(dtype);
    std::vector<std::int64_t> perm(static_cast<std::size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    at::Tensor view = i % 3 == 0 ? base.transpose(-1, -2) : base.permute(perm);
    fast += hasFastKernel(view);
    ASSERT_TRUE(sameBits(contiguousFast(view), view.contiguous()))
        << "sizes " << view.sizes() << " strides " << view.strides();
  }
  EXPECT_GT(fast, 20) << "the blocked kernel should cover the batched transposes";
  // (Batched) transposes of 2-, 4- and 8-byte elements use the blocked kernel; bytes, other
  // layouts and small tensors use ATen's.
  EXPECT_TRUE(hasFastKernel(at::zeros({4, 64, 128}).transpose(1, 2)));
  EXPECT_TRUE(hasFastKernel(at::zeros({4, 64, 128}, at::kDouble).transpose(1, 2)));
  EXPECT_TRUE(hasFastKernel(at::zeros({4, 64, 128}, at::kHalf).transpose(1, 2)));
  EXPECT_TRUE(hasFastKernel(at::zeros({64, 128}).t()));
  EXPECT_FALSE(hasFastKernel(at::zeros({4, 64, 128}, at::kByte).transpose(1, 2)));
  EXPECT_FALSE(hasFastKernel(at::zeros({8, 8}).t()));
  EXPECT_FALSE(hasFastKernel(at::zeros({64, 128})));
  EXPECT_FALSE(hasFastKernel(at::zeros({64, 128, 4}).transpose(0, 1)));
}

// Matrices cut from wider ones (ld > rows) and several batch dimensions: attention's K^T after
// the heads are split with view + transpose, a transposed slice, heads over a sliced batch.
TEST(Async, BlockedTransposeReadsMatricesCutFromWiderOnes) {
  const auto bits = [](std::vector<std::int64_t> shape, c10::ScalarType dtype) {
    at::Tensor raw = at::randint(0, 256, shape, at::kByte);
    shape.back() /= static_cast<std::int64_t>(c10::elementSize(dtype));
    return raw.view(dtype);
  };
  // [B, T, C] -> [B, H, T, D] -> K^T [B, H, D, T]: ld = C, two batch dimensions.
  const at::Tensor k = bits({4, 197, 768 * 4}, at::kFloat).view({4, 197, 12, 64}).transpose(1, 2);
  const at::Tensor kt = k.transpose(-2, -1);
  const std::vector<std::pair<std::string, at::Tensor>> cases = {
      {"K^T of split heads", kt},
      {"K^T float16",
       bits({2, 128, 512 * 2}, at::kHalf).view({2, 128, 8, 64}).permute({0, 2, 3, 1})},
      {"transposed slice", bits({300, 1000 * 8}, at::kDouble).narrow(1, 100, 600).t()},
      {"heads of every other batch", bits({6, 64, 256 * 4}, at::kFloat)
                                         .slice(0, 0, 6, 2)
                                         .view({3, 64, 4, 64})
                                         .permute({0, 2, 3, 1})},
  };
  for (const auto& [name, view] : cases) {
    EXPECT_TRUE(hasFastKernel(view))
        << name << " sizes " << view.sizes() << " strides " << view.strides();
    EXPECT_TRUE(sameBits(contiguousFast(view), view.contiguous())) << name;
    EXPECT_TRUE(sameBits(contiguousFast(view, /*parallel=*/false), view.contiguous())) << name;
  }
  // Rows narrower than 16 bytes out of wider matrices stay with ATen's loop.
  EXPECT_FALSE(hasFastKernel(at::zeros({512, 1000}).narrow(1, 0, 3).t()));
}

// Every path of the kernel on purpose: whole and partial tiles, outputs large enough for
// streaming stores with rows that are and are not multiples of 16 bytes, batches with a batch
// stride of their own, a storage offset, and arbitrary bit patterns (NaN payloads included).
TEST(Async, BlockedTransposeCoversTilesStreamingAndOffsets) {
  struct Case {
    c10::ScalarType dtype;
    std::vector<std::int64_t> shape; // of the contiguous base; the view transposes the last two
  };
  const std::vector<Case> cases = {
      {at::kFloat, {1024, 1024}},   {at::kFloat, {1031, 1027}}, {at::kFloat, {3, 700, 1012}},
      {at::kDouble, {700, 1024}},   {at::kDouble, {61, 133}},   {at::kHalf, {1500, 1536}},
      {at::kBFloat16, {67, 129}},   {at::kInt, {2, 2048, 520}}, {at::kLong, {5, 300, 301}},
      {at::kHalf, {2, 1027, 1029}},
  };
  for (const auto& c : cases) {
    at::Tensor base = at::empty(c.shape, at::TensorOptions().dtype(c.dtype));
    // Random bytes, so that every bit pattern the dtype can hold may appear.
    at::Tensor raw = at::randint(0, 256, {static_cast<std::int64_t>(base.nbytes())}, at::kByte);
    std::memcpy(base.data_ptr(), raw.data_ptr(), static_cast<std::size_t>(base.nbytes()));
    at::Tensor view = base.transpose(-1, -2);
    ASSERT_TRUE(hasFastKernel(view)) << c.shape;
    ASSERT_TRUE(sameBits(contiguousFast(view), view.contiguous())) << c.shape;
    // A storage offset, and a batch stride that is not rows * cols (every other batch).
    at::Tensor shifted = base.reshape({-1}).narrow(0, 3, base.numel() - 3);
    at::Tensor v2 = shifted.narrow(0, 0, (base.numel() - 3) / c.shape.back() * c.shape.back())
                        .view({-1, c.shape.back()})
                        .t();
    ASSERT_TRUE(sameBits(contiguousFast(v2), v2.contiguous())) << c.shape << " offset";
    if (c.shape.size() == 3 && c.shape[0] > 1) {
      at::Tensor every_other = base.slice(0, 0, c.shape[0], 2).transpose(1, 2);
      ASSERT_TRUE(sameBits(contiguousFast(every_other), every_other.contiguous())) << c.shape;
    }
  }
}

TEST(Async, ContiguousInputReturnsAtOnce) {
  at::Tensor x = at::ones({100, 100});
  AsyncHandle h = contiguousAsync(x);
  EXPECT_TRUE(h.done());
  EXPECT_TRUE(h.wait().is_same(x));
}

TEST(Async, InputsStayAliveUntilTheCopyIsDone) {
  std::vector<AsyncHandle> handles;
  std::vector<at::Tensor> expected;
  for (int i = 0; i < 16; ++i) { // many in flight at once
    at::Tensor src = at::randn({300, 257}) + i;
    expected.push_back(src.t().contiguous());
    handles.push_back(contiguousAsync(src.t()));
    src.reset(); // the caller drops its only reference before the copy may have started
  }
  // Reuse freed memory meanwhile: a dangling input would read these values.
  std::vector<at::Tensor> noise;
  for (int i = 0; i < 16; ++i)
    noise.push_back(at::full({300, 257}, -1.0));
  for (std::size_t i = 0; i < handles.size(); ++i)
    EXPECT_TRUE(sameBits(handles[i].wait(), expected[i])) << "conversion " << i;
}

TEST(Async, ErrorsReachTheWaiter) {
  at::Tensor big = at::randn({1024, 1024}); // 4 MiB, allocated before the cap
  InstallOptions tiny;
  tiny.limit_bytes = 1 << 20; // the conversion's output cannot be allocated
  tiny.retry.deadline_ms = 20;
  {
    Guard g(tiny);
    AsyncHandle h = contiguousAsync(big.t());
    EXPECT_THROW(h.wait(), c10::OutOfMemoryError);
  }
  EXPECT_THROW(AsyncHandle().wait(), c10::Error);
  // The worker survives the failure.
  EXPECT_TRUE(sameBits(contiguousAsync(big.t()).wait(), big.t().contiguous()));
}

namespace {
// Runs a graph in IR form on one input; returns its outputs.
torch::jit::Stack runGraph(const std::string& ir, const at::Tensor& x) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(ir, graph.get());
  torch::jit::GraphExecutor exec(graph, "t");
  torch::jit::Stack stack{x};
  exec.run(stack);
  return stack;
}
} // namespace

TEST(Async, TorchScriptOpRunsInAGraph) {
  // contiguous_async and contiguous; conv2d_packed, conv2d_packed_add, conv3d_packed,
  // conv3d_packed_add, linear_packed, attention_packed, squeeze_excite, mkldnn_constant and
  // broadcast_mkldnn (packed.h); channel_shuffle, cat_shuffle and cat_shuffle_chunk; to_blocked,
  // blocked_max_pool2d, blocked_max_pool3d and blocked_ relu, hardswish, hardsigmoid and relu6,
  // each in place and not (blocked_ops.cpp); activations_enter and activations_exit
  // (activation_cache.h); max_pool2d (pool_nhwc.cpp).
  ASSERT_EQ(loadOps(), 28);
  at::Tensor x = at::randn({123, 77});
  const auto out = runGraph(R"IR(
graph(%x : Tensor):
  %0 : int = prim::Constant[value=0]()
  %1 : int = prim::Constant[value=1]()
  %t : Tensor = aten::transpose(%x, %0, %1)
  %f : Future(Tensor) = xalloc::contiguous_async(%t)
  %c : Tensor = aten::wait(%f)
  return (%c))IR",
                            x);
  EXPECT_TRUE(sameBits(out.back().toTensor(), x.t().contiguous()));
}

// The fast form's sync conversion: the runtime's kernel, and the input itself when it is
// contiguous already (as aten::contiguous).
TEST(Async, TorchScriptSyncOpRunsInAGraph) {
  at::Tensor x = at::randn({300, 257});
  const auto out = runGraph(R"IR(
graph(%x : Tensor):
  %0 : int = prim::Constant[value=0]()
  %1 : int = prim::Constant[value=1]()
  %t : Tensor = aten::transpose(%x, %0, %1)
  %c : Tensor = xalloc::contiguous(%t)
  %d : Tensor = xalloc::contiguous(%x)
  return (%c, %d))IR",
                            x);
  EXPECT_TRUE(sameBits(out[0].toTensor(), x.t().contiguous()));
  EXPECT_TRUE(out[1].toTensor().is_same(x));
}

// Large outputs are mapped with huge pages asked for; a freed mapping serves the next output of
// its size (no page faults, no zeroing); an installed graceful allocator allocates every output
// itself, so its budget and statistics see them.
TEST(Async, LargeOutputsReuseTheirMappingsUnlessAnAllocatorIsInstalled) {
  releaseOutputCache();
  at::Tensor src = at::randn({1024, 1536}); // 6 MiB
  const std::int64_t mapped = hugePageOutputs();
  at::Tensor a = contiguousFast(src.t());
  EXPECT_EQ(hugePageOutputs(), mapped + 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data_ptr()) % (2 << 20), 0u);
  EXPECT_TRUE(sameBits(a, src.t().contiguous()));
  const void* first = a.data_ptr();
  a.reset();
  at::Tensor b = contiguousFast((src + 1).t()); // same size: the cached mapping
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(hugePageOutputs(), mapped + 1);
  EXPECT_TRUE(sameBits(b, (src + 1).t().contiguous()));
  b.reset();
  EXPECT_GE(releaseOutputCache(), std::size_t{6} << 20);
  EXPECT_EQ(releaseOutputCache(), 0u);
  // Small outputs come from libtorch's allocator.
  at::Tensor small = contiguousFast(at::randn({64, 128}).t());
  EXPECT_EQ(hugePageOutputs(), mapped + 1);
  {
    InstallOptions o;
    o.limit_bytes = 256 << 20;
    Guard g(o);
    resetStats();
    const double before = stats()["allocated_bytes.all.current"];
    at::Tensor c = contiguousFast(src.t());
    EXPECT_EQ(hugePageOutputs(), mapped + 1);
    EXPECT_GE(stats()["allocated_bytes.all.current"] - before, 6.0 * (1 << 20));
    EXPECT_TRUE(sameBits(c, src.t().contiguous()));
  }
}

// The runtime's numeric variables (XALLOC_ASYNC_WORKERS, XALLOC_OUTPUT_CACHE_MB,
// XALLOC_PACKED_CACHE, XALLOC_CUDA_STREAMS) are read one way: a whole number in range, the
// default when unset or empty, and anything else one error naming the variable and the range.
TEST(RuntimeEnv, NumbersAreWholeAndInRangeOrOneError) {
  const char* name = "XALLOC_TEST_COUNT";
  ::unsetenv(name);
  EXPECT_EQ(xalloc::runtime::envCount(name, 7, 1, 64, "workers"), 7u);
  ::setenv(name, "", 1);
  EXPECT_EQ(xalloc::runtime::envCount(name, 7, 1, 64, "workers"), 7u);
  ::setenv(name, "12", 1);
  EXPECT_EQ(xalloc::runtime::envCount(name, 7, 1, 64, "workers"), 12u);
  for (const char* bad :
       {"abc", "-1", "+3", " 8", "8x", "1e3", "0", "65", "99999999999999999999"}) {
    ::setenv(name, bad, 1);
    try {
      xalloc::runtime::envCount(name, 7, 1, 64, "workers");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const c10::Error& e) {
      const std::string what = e.what_without_backtrace();
      EXPECT_NE(what.find(std::string(name) + "=" + bad), std::string::npos) << what;
      EXPECT_NE(what.find("from 1 to 64"), std::string::npos) << what;
    }
  }
  ::unsetenv(name);
}
