// The runtime's packed ops keep the op contract (packed.h, docs/runtime-ops.md): NaN and
// infinity come out where ATen's do (also through the fused relu, relu6 and hard sigmoid);
// residual adds are ATen's conv, add and activation; gradients are ATen's; bad arguments (from a
// model file too) are exceptions, not signals; inputs ATen refuses are refused and its edge
// shapes give its results; the per-shape cache stays within its bound. Threads:
// test_packed_threads.cpp; the blocked regions' ops: test_blocked_nan.cpp.
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include "xalloc/runtime/packed.h"

#include "../../runtime/kernels/blocked_ops.h"
#include "../../runtime/kernels/dispatch.h"
#include "../../runtime/kernels/packed_checks.h"
#include "packed_cases.h"

using namespace xalloc::runtime;
using namespace xalloc::testing;

TEST(PackedOps, NanAndInfinityComeOutWhereATensDo) {
  for (const auto& c : kConvs) {
    auto conv = makeConv(c);
    at::Tensor x = at::randn({2, c.in, 12, 12});
    x.index_put_({0, 1, 5, 5}, NAN);
    x.index_put_({1, 2, 3, 3}, INFINITY);
    x.index_put_({1, 3, 9, 9}, -INFINITY);
    expectSameNonFinite(conv->run(x), conv->reference(x), std::string(c.name) + " (NaN, inf)");
    // Finite, but so large that a sum in another order may overflow (then inf - inf = NaN).
    at::Tensor big = at::randn({1, c.in, 12, 12}).mul(3e37);
    const at::Tensor ref = conv->reference(big);
    const at::Tensor got = conv->run(big);
    EXPECT_TRUE(at::equal(at::isnan(got), at::isnan(ref))) << c.name << " (near float's max)";
  }
  // Every other activation keeps NaN and both infinities through oneDNN as through ATen (their
  // inputs are not scanned).
  for (const char* post : {"none", "silu", "sigmoid", "gelu", "tanh", "hardswish"}) {
    const ConvCase c{post, 8, 16, 3, 1, 1, 1, post};
    auto conv = makeConv(c);
    at::Tensor x = at::randn({1, 8, 10, 10});
    x.index_put_({0, 1, 2, 2}, NAN);
    x.index_put_({0, 2, 6, 6}, INFINITY);
    x.index_put_({0, 3, 8, 3}, -INFINITY);
    expectSameNonFinite(conv->run(x), conv->reference(x), std::string(post) + " (NaN, inf)");
  }
  auto linear = c10::make_intrusive<PackedLinear>(at::randn({16, 32}), at::randn({16}), "relu");
  at::Tensor x = at::randn({3, 32});
  x.index_put_({1, 4}, NAN);
  expectSameNonFinite(linear->run(x), linear->reference(x), "linear_packed relu");
  // A NaN weight: every output it reaches is NaN, as in ATen.
  at::Tensor w = at::randn({8, 4, 3, 3});
  w.index_put_({2, 0, 1, 1}, NAN);
  auto nan_conv = c10::make_intrusive<PackedConv>(w, c10::nullopt, std::vector<std::int64_t>{1, 1},
                                                  std::vector<std::int64_t>{1, 1},
                                                  std::vector<std::int64_t>{1, 1}, 1, "relu");
  const at::Tensor y = at::randn({1, 4, 6, 6});
  expectSameNonFinite(nan_conv->run(y), nan_conv->reference(y), "a NaN weight");
}

// conv2d_packed_add: post(conv(x) + r) in one pass, as ATen's conv2d, add and activation: with
// every activation, a residual in either layout, NaN and infinity in x or r where ATen has
// them, a residual ATen would broadcast or promote, from 4 threads, and gradients.
// Every fused activation overflows, saturates and keeps NaN as ATen's unfused op: a pixel of
// +-3e38 or +-inf (ATen's hardswish computes x * 6 first: inf above 5.67e37, where oneDNN's
// stays finite), through a convolution, a convolution with a residual, and a linear.
TEST(PackedOps, ActivationsAtTheExtremesAreATens) {
  if (!hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  for (const char* post :
       {"relu", "relu6", "hardswish", "hardsigmoid", "silu", "gelu", "sigmoid", "tanh", "none"})
    for (float v : {3e38f, -3e38f, INFINITY, -INFINITY}) {
      const std::string what = std::string(post) + " at " + std::to_string(v);
      auto conv = makeConv({"pointwise", 8, 16, 1, 1, 0, 1, post});
      at::Tensor x = at::randn({1, 8, 6, 6});
      x.index_put_({0, 2, 3, 3}, v);
      const at::Tensor got = conv->run(x), ref = conv->reference(x);
      EXPECT_TRUE(at::equal(at::isnan(got), at::isnan(ref))) << what << ": NaN";
      EXPECT_TRUE(at::equal(at::isinf(got), at::isinf(ref))) << what << ": inf";
      const at::Tensor ok = at::isfinite(ref).logical_and(at::isfinite(got));
      EXPECT_TRUE(at::allclose(got.masked_select(ok), ref.masked_select(ok), 1e-4, 1e-4)) << what;
      const std::string add_post =
          std::strcmp(post, "none") == 0 ? "add" : "add+" + std::string(post);
      auto add = makeConv({"pointwise", 8, 16, 1, 1, 0, 1, add_post.c_str()});
      const at::Tensor xa = at::randn({1, 8, 6, 6});
      at::Tensor r = at::randn({1, 16, 6, 6});
      r.index_put_({0, 5, 1, 1}, v);
      const at::Tensor ga = add->runAdd(xa, r), ra = add->referenceAdd(xa, r);
      EXPECT_TRUE(at::equal(at::isnan(ga), at::isnan(ra))) << what << ": residual NaN";
      EXPECT_TRUE(at::equal(at::isinf(ga), at::isinf(ra))) << what << ": residual inf";
      at::manual_seed(9);
      auto linear = c10::make_intrusive<PackedLinear>(at::randn({16, 8}), at::randn({16}), post);
      at::Tensor xl = at::randn({4, 8});
      xl.index_put_({1, 3}, v);
      const at::Tensor gl = linear->run(xl), rl = linear->reference(xl);
      EXPECT_TRUE(at::equal(at::isnan(gl), at::isnan(rl))) << what << ": linear NaN";
      EXPECT_TRUE(at::equal(at::isinf(gl), at::isinf(rl))) << what << ": linear inf";
    }
}

TEST(PackedOps, ResidualAddsAreATensConvAddAndActivation) {
  at::manual_seed(11);
  for (const char* post : {"add", "add+relu", "add+relu6", "add+hardswish", "add+silu"}) {
    SCOPED_TRACE(post);
    const ConvCase c{post, 16, 32, 3, 1, 1, 1, post};
    auto conv = makeConv(c);
    EXPECT_TRUE(conv->residual);
    EXPECT_EQ(std::get<6>(conv->state()), post);
    const at::Tensor x = at::randn({2, 16, 14, 14});
    for (bool channels_last : {true, false}) {
      at::Tensor r = at::randn({2, 32, 14, 14});
      if (channels_last)
        r = r.contiguous(at::MemoryFormat::ChannelsLast);
      const at::Tensor got = conv->runAdd(x, r);
      EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
      EXPECT_LT(relError(got, conv->referenceAdd(x, r)), 1e-5) << channels_last;
      // With relu and relu6 (clips), bit for bit the packed convolution, ATen's add and the
      // activation one after another (oneDNN's silu and hard swish are its own, as fused alone).
      // That holds for oneDNN's AVX-512 kernels; with its AVX2 ones (an AMD EPYC without
      // AVX-512, session 28) the fused sum differs in the last bits: within the bound above.
      const std::string act = std::string(post).size() > 4 ? std::string(post).substr(4) : "none";
      if (xalloc::runtime::cpuIsa() == xalloc::runtime::Isa::Avx512f &&
          (act == "none" || act == "relu" || act == "relu6")) {
        auto plain = makeConv({"plain", 16, 32, 3, 1, 1, 1, "none"});
        EXPECT_TRUE(at::equal(got, applyPostOp(at::add(plain->run(x), r), *parsePostOp(act))))
            << channels_last;
      }
    }
    // Non-finite values in x or in the residual come out where ATen's do, also through relu.
    at::Tensor xn = x.clone(), rn = at::randn({2, 32, 14, 14});
    xn.index_put_({0, 1, 5, 5}, NAN);
    rn.index_put_({1, 3, 2, 2}, NAN);
    rn.index_put_({1, 4, 7, 7}, INFINITY);
    rn.index_put_({0, 5, 9, 9}, -INFINITY);
    expectSameNonFinite(conv->runAdd(x, rn), conv->referenceAdd(x, rn), "NaN, inf in r");
    expectSameNonFinite(conv->runAdd(xn, rn), conv->referenceAdd(xn, rn), "NaN in x and r");
    // A residual the add broadcasts, or of another dtype: ATen's result and dtype.
    const at::Tensor row = at::randn({32, 1, 1});
    EXPECT_LT(relError(conv->runAdd(x, row), conv->referenceAdd(x, row)), 1e-6);
    const at::Tensor dbl = at::randn({2, 32, 14, 14}, at::kDouble);
    EXPECT_EQ(conv->runAdd(x, dbl).scalar_type(), at::kDouble);
    // An empty batch and an unbatched input, as ATen.
    EXPECT_EQ(conv->runAdd(at::randn({0, 16, 14, 14}), at::randn({0, 32, 14, 14})).sizes(),
              (std::vector<std::int64_t>{0, 32, 14, 14}));
    const at::Tensor r_unbatched = at::randn({32, 14, 14});
    EXPECT_LT(relError(conv->runAdd(x[0], r_unbatched), conv->referenceAdd(x[0], r_unbatched)),
              1e-5);
    // The wrong op for the convolution: one clear error either way.
    EXPECT_THROW(conv->run(x), c10::Error);
  }
  EXPECT_THROW(makeConv(kConvs[0])->runAdd(at::randn({1, 16, 8, 8}), at::randn({1, 32, 8, 8})),
               c10::Error);
  for (const char* bad : {"add+", "add+add", "addrelu", "add+swish"})
    EXPECT_THROW(makeConv({bad, 16, 32, 3, 1, 1, 1, bad}), c10::Error) << bad;

  // Threads: 4 at once on one op, each with its own batch and residual.
  auto conv = makeConv({"threads", 16, 32, 3, 1, 1, 1, "add+relu"});
  std::vector<at::Tensor> xs, rs, refs;
  for (std::int64_t b : {1, 2, 1, 3}) {
    xs.push_back(at::randn({b, 16, 20, 20}));
    rs.push_back(at::randn({b, 32, 20, 20}).contiguous(at::MemoryFormat::ChannelsLast));
    refs.push_back(conv->referenceAdd(xs.back(), rs.back()));
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < xs.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i)
        if (relError(conv->runAdd(xs[t], rs[t]), refs[t]) > 1e-5)
          ++wrong;
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(wrong.load(), 0);

  // A residual that wants gradients: ATen's path, whose history reaches the residual.
  at::Tensor rg = at::randn({1, 32, 20, 20}).requires_grad_(true);
  const at::Tensor y = conv->runAdd(xs[0], rg);
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  ASSERT_TRUE(rg.grad().defined());
  EXPECT_TRUE(at::equal(rg.grad(), (conv->referenceAdd(xs[0], rg.detach()) > 0).to(at::kFloat)));
}

// A residual passed at its last use (the only handle of its tensor and storage) is added into
// in place, no copy; one held anywhere else (a caller's handle, a view, a later reader in the
// graph) is copied and keeps its values. Both give ATen's result.
TEST(PackedOps, AResidualAtItsLastUseIsAddedIntoAndOneHeldIsNot) {
  at::manual_seed(3);
  auto conv = makeConv({"into", 16, 32, 3, 1, 1, 1, "add+relu"});
  const at::Tensor x = at::randn({1, 16, 12, 12});
  const at::Tensor r = at::randn({1, 32, 12, 12}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor want = conv->referenceAdd(x, r);
  const at::Tensor r0 = r.clone();
  at::Tensor alone = r.clone();
  const void* p = alone.data_ptr();
  const at::Tensor into = conv->runAddInto(x, std::move(alone));
  EXPECT_EQ(into.data_ptr(), p) << "a residual no one holds was copied";
  EXPECT_LT(relError(into, want), 1e-5);
  at::Tensor kept = r.clone();
  at::Tensor handle = kept;
  const at::Tensor copied = conv->runAddInto(x, std::move(handle));
  EXPECT_NE(copied.data_ptr(), kept.data_ptr());
  EXPECT_TRUE(at::equal(kept, r)) << "a residual the caller holds was written";
  EXPECT_LT(relError(copied, want), 1e-5);
  at::Tensor owner = r.clone();
  at::Tensor viewed = owner.alias();
  (void)conv->runAddInto(x, std::move(viewed));
  EXPECT_TRUE(at::equal(owner, r)) << "a view's storage, held elsewhere, was written";

  // Through TorchScript: the interpreter passes r2 at its last use in `last`, and keeps it
  // for the return in `kept`, where it must come back unchanged.
  auto g = std::make_shared<torch::jit::Graph>();
  const c10::IValue w(conv);
  torch::jit::parseIR(R"IR(
graph(%x : Tensor, %r : Tensor, %w : __torch__.torch.classes.xalloc.PackedConv):
  %one : float = prim::Constant[value=1.]()
  %r2 : Tensor = aten::mul(%r, %one)
  %y : Tensor = xalloc::conv2d_packed_add(%x, %w, %r2)
  %out : (Tensor, Tensor) = prim::TupleConstruct(%y, %r2)
  return (%out))IR",
                      g.get());
  torch::jit::GraphExecutor exec(g, "kept");
  torch::jit::Stack stack{x, r, w};
  exec.run(stack);
  const auto both = stack.at(0).toTupleRef().elements();
  EXPECT_LT(relError(both[0].toTensor(), want), 1e-5);
  EXPECT_TRUE(at::equal(both[1].toTensor(), r)) << "a residual read after the op was written";
  auto last = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%x : Tensor, %r : Tensor, %w : __torch__.torch.classes.xalloc.PackedConv):
  %one : float = prim::Constant[value=1.]()
  %r2 : Tensor = aten::mul(%r, %one)
  %y : Tensor = xalloc::conv2d_packed_add(%x, %w, %r2)
  return (%y))IR",
                      last.get());
  torch::jit::GraphExecutor exec_last(last, "last");
  for (int i = 0; i < 3; ++i) { // profiled, then optimized
    torch::jit::Stack s{x, r, w};
    exec_last.run(s);
    EXPECT_LT(relError(s.at(0).toTensor(), want), 1e-5) << i;
  }
  EXPECT_TRUE(at::equal(r, r0)); // the caller's r untouched
}

// A packed convolution notes the bound of what it made, and the next one trusts the note
// instead of scanning: outputs of finite inputs are finite and within the note. Any in-place
// write (ATen's version counter moves) voids the note, so a NaN written into a noted output still
// comes out where ATen's relu keeps it; a residual written into is noted afresh.
TEST(PackedOps, ABoundNotedByTheOpThatMadeATensorHoldsUntilItIsWritten) {
  at::manual_seed(8);
  c10::NoGradGuard no_grad;
  auto first = makeConv({"first", 8, 16, 3, 1, 1, 1, "relu"});
  auto second = makeConv({"second", 16, 16, 3, 1, 1, 1, "relu"});
  auto added = makeConv({"added", 16, 16, 3, 1, 1, 1, "add+relu6"});
  const at::Tensor x = at::randn({1, 8, 12, 12});
  EXPECT_FALSE(xalloc::runtime::detail::knownBound(x)) << "nothing noted for the caller's tensor";
  at::Tensor y = first->run(x);
  const auto b = xalloc::runtime::detail::knownBound(y);
  ASSERT_TRUE(b);
  EXPECT_GE(*b, y.abs().max().item<double>());
  const SumBounds sb = xalloc::runtime::detail::sumBounds(first->weight, first->bias);
  EXPECT_LE(*b, 1.01 * (x.abs().max().item<double>() * sb.weights + sb.bias));
  const at::Tensor z = second->run(y);
  EXPECT_LT(relError(z, second->reference(y)), 1e-5);
  ASSERT_TRUE(xalloc::runtime::detail::knownBound(z));
  EXPECT_GE(*xalloc::runtime::detail::knownBound(z), z.abs().max().item<double>());
  const at::Tensor sum = added->runAdd(y, z);
  ASSERT_TRUE(xalloc::runtime::detail::knownBound(sum));
  EXPECT_LE(*xalloc::runtime::detail::knownBound(sum), 6.0) << "relu6's bound";
  // Written in place: the note goes, the NaN is scanned and kept as ATen keeps it.
  y.index_put_({0, 3, 4, 4}, NAN);
  EXPECT_FALSE(xalloc::runtime::detail::knownBound(y));
  expectSameNonFinite(second->run(y), second->reference(y), "a NaN written into a noted output");
  at::Tensor w = first->run(x);
  w.mul_(1e30);
  EXPECT_FALSE(xalloc::runtime::detail::knownBound(w));
  // A view is another tensor object: not noted, scanned.
  at::Tensor v = first->run(x);
  at::Tensor view = v.view(v.sizes());
  EXPECT_FALSE(xalloc::runtime::detail::knownBound(view));
  view.index_put_({0, 1, 1, 1}, INFINITY); // moves the counter the two share
  EXPECT_FALSE(xalloc::runtime::detail::knownBound(v));
  expectSameNonFinite(second->run(v), second->reference(v), "inf written through a view");
  // Forty layers multiply a note's bound by ~23 each (the weights' sums), past 1e38, while the
  // values grow ~2x a layer: an op given a note too large to pass scans for the real bound and
  // stays packed (its output noted), where trusting the note would send it to ATen's path.
  auto deep = makeConv({"deep", 16, 16, 3, 1, 1, 1, "relu"});
  at::Tensor h = at::rand({1, 16, 10, 10});
  for (int layer = 0; layer < 40; ++layer) {
    h = deep->run(h);
    ASSERT_TRUE(xalloc::runtime::detail::knownBound(h)) << "layer " << layer << " took ATen's path";
  }
  EXPECT_LT(h.abs().max().item<double>(), 1e30);
  // Another thread keeps notes of its own.
  const at::Tensor mine = first->run(x);
  bool other = true;
  std::thread([&] { other = xalloc::runtime::detail::knownBound(mine).has_value(); }).join();
  EXPECT_FALSE(other);
  EXPECT_TRUE(xalloc::runtime::detail::knownBound(mine));
}

TEST(PackedOps, GradientsAreATensOrTheOutputIsNotDetached) {
  for (const auto& c : kConvs) {
    auto conv = makeConv(c);
    // A skip connection around the convolution: a detached output would lose its share.
    at::Tensor x = at::randn({2, c.in, 10, 10}).requires_grad_();
    at::Tensor y = conv->run(x);
    ASSERT_TRUE(y.requires_grad()) << c.name << ": the output came back detached";
    auto skip = [&](const at::Tensor& out) {
      return c.stride == 1 && c.in == c.out ? out + x : out;
    };
    const at::Tensor g = torch::autograd::grad({skip(y).pow(2).sum()}, {x})[0];
    const at::Tensor g_ref = torch::autograd::grad({skip(conv->reference(x)).pow(2).sum()}, {x})[0];
    EXPECT_LT(relError(g, g_ref), 1e-5) << c.name;
  }
  auto linear = c10::make_intrusive<PackedLinear>(at::randn({16, 32}), at::randn({16}), "silu");
  at::Tensor x = at::randn({3, 32}).requires_grad_();
  const at::Tensor g = torch::autograd::grad({linear->run(x).sum()}, {x})[0];
  const at::Tensor g_ref = torch::autograd::grad({linear->reference(x).sum()}, {x})[0];
  EXPECT_LT(relError(g, g_ref), 1e-5);
  // Without grad mode nothing is recorded.
  c10::NoGradGuard no_grad;
  EXPECT_FALSE(linear->run(x).requires_grad());
}

TEST(PackedOps, BadArgumentsAreExceptionsNotSignals) {
  const at::Tensor w = at::randn({8, 4, 3, 3});
  const std::vector<std::int64_t> one{1, 1}, zero{0, 0};
  auto make = [&](at::Tensor weight, c10::optional<at::Tensor> b, std::vector<std::int64_t> s,
                  std::vector<std::int64_t> p, std::vector<std::int64_t> d, std::int64_t g) {
    return c10::make_intrusive<PackedConv>(weight, b, s, p, d, g, "relu");
  };
  EXPECT_THROW(make(w, c10::nullopt, zero, one, one, 1), c10::Error) << "stride 0";
  EXPECT_THROW(make(w, c10::nullopt, {1, -2}, one, one, 1), c10::Error) << "negative stride";
  EXPECT_THROW(make(w, c10::nullopt, one, {-1, 0}, one, 1), c10::Error) << "negative padding";
  EXPECT_THROW(make(w, c10::nullopt, one, one, zero, 1), c10::Error) << "dilation 0";
  EXPECT_THROW(make(w, c10::nullopt, one, one, one, 0), c10::Error) << "groups 0";
  EXPECT_THROW(make(w, c10::nullopt, one, one, one, 3), c10::Error) << "groups not dividing";
  EXPECT_THROW(make(w, c10::nullopt, {1}, one, one, 1), c10::Error) << "one stride";
  EXPECT_THROW(make(w, at::randn({8}, at::kDouble), one, one, one, 1), c10::Error) << "f64 bias";
  EXPECT_THROW(make(w, at::randn({0}), one, one, one, 1), c10::Error) << "empty bias";
  EXPECT_THROW(make(w, at::randn({5}), one, one, one, 1), c10::Error) << "short bias";
  EXPECT_THROW(make(w.to(at::kDouble), c10::nullopt, one, one, one, 1), c10::Error) << "f64";
  EXPECT_THROW(make(at::randn({8, 4, 3}), c10::nullopt, one, one, one, 1), c10::Error) << "3-D";
  EXPECT_THROW(make(at::randn({0, 4, 3, 3}), c10::nullopt, one, one, one, 1), c10::Error);
  EXPECT_THROW(c10::make_intrusive<PackedConv>(w, c10::nullopt, one, one, one, 1, "swish!"),
               c10::Error);
  // A weight whose sizes reach past its storage (as a model file can say).
  at::Tensor lying = at::empty({0});
  {
    auto storage = at::randn({100}).storage();
    auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(storage),
                                                     c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                     caffe2::TypeMeta::Make<float>());
    impl->set_sizes_contiguous({8, 4, 3, 3});
    lying = at::Tensor(std::move(impl));
  }
  EXPECT_THROW(make(lying, c10::nullopt, one, one, one, 1), c10::Error) << "short storage";
  EXPECT_THROW(c10::make_intrusive<PackedLinear>(lying.view({8, 36}), c10::nullopt, "none"),
               c10::Error);
  // A storage that says more bytes than the block it was read into (libtorch sizes a loaded
  // storage by the pickle, whatever the record held): refused before the constructor reads it.
  {
    c10::Storage short_record(c10::Storage::use_byte_size_t(), 8 * 4 * 3 * 3 * 4,
                              c10::GetDefaultCPUAllocator()->allocate(64), nullptr, false);
    auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(short_record),
                                                     c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                     caffe2::TypeMeta::Make<float>());
    impl->set_sizes_contiguous({8, 4, 3, 3});
    EXPECT_THROW(make(at::Tensor(std::move(impl)), c10::nullopt, one, one, one, 1), c10::Error)
        << "a storage larger than its block";
  }
  EXPECT_THROW(c10::make_intrusive<PackedLinear>(at::randn({4, 3}), at::randn({3}), "none"),
               c10::Error)
      << "short bias";
  EXPECT_THROW(
      c10::make_intrusive<PackedLinear>(at::randn({4, 3}), at::randn({4}, at::kDouble), "none"),
      c10::Error);
  EXPECT_THROW(
      c10::make_intrusive<MkldnnConstant>(w, std::vector<std::int64_t>{1, 1, 0, 1, 1, 1, 1}),
      c10::Error)
      << "MkldnnConstant stride 0";
  EXPECT_THROW(
      c10::make_intrusive<MkldnnConstant>(w, std::vector<std::int64_t>{1, 1, 1, 1, 1, 1, 0}),
      c10::Error)
      << "MkldnnConstant groups 0";
  EXPECT_THROW(
      c10::make_intrusive<MkldnnConstant>(w, std::vector<std::int64_t>{1, 1, 1, 1, 1, 1, 3}),
      c10::Error);
  // A model loaded with map_location="meta": loads, and says so when called.
  auto meta = make(w.to(at::kMeta), c10::nullopt, one, one, one, 1);
  try {
    meta->run(at::randn({1, 4, 8, 8}));
    ADD_FAILURE() << "a meta weight ran";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("meta"), std::string::npos);
  }
}

TEST(PackedOps, InputsATenRefusesAreRefusedAndEdgeShapesGiveItsResults) {
  auto conv = makeConv(kConvs[0]); // 16 -> 32, 3x3, padding 1
  EXPECT_THROW(conv->run(at::randn({1, 16, 0, 0})), c10::Error);
  EXPECT_THROW(conv->run(at::randn({1, 15, 8, 8})), c10::Error) << "channels";
  EXPECT_THROW(conv->run(at::randn({1, 16, 8, 8}, at::kDouble)), c10::Error) << "dtype";
  EXPECT_THROW(conv->run(at::randn({16, 8})), c10::Error) << "2-D";
  EXPECT_THROW(conv->run(at::scalar_tensor(1.0)), c10::Error) << "0-D";
  EXPECT_THROW(conv->run(at::randn({1, 16, 8, 8}, at::kMeta)), c10::Error) << "meta input";
  EXPECT_THROW(conv->run(at::Tensor()), c10::Error) << "undefined";
  auto no_pad = c10::make_intrusive<PackedConv>(
      at::randn({8, 4, 3, 3}), c10::nullopt, std::vector<std::int64_t>{2, 2},
      std::vector<std::int64_t>{0, 0}, std::vector<std::int64_t>{1, 1}, 1, "none");
  // (2 - 3 - 1) / 2 + 1 is 1 in C++'s division: ATen refuses the input all the same.
  EXPECT_THROW(no_pad->run(at::randn({1, 4, 2, 2})), c10::Error) << "smaller than the kernel";
  // An empty batch, and an unbatched input, as ATen.
  const at::Tensor empty = conv->run(at::randn({0, 16, 9, 7}));
  EXPECT_EQ(empty.sizes(), conv->reference(at::randn({0, 16, 9, 7})).sizes());
  const at::Tensor x3 = at::randn({16, 9, 7});
  EXPECT_EQ(conv->run(x3).sizes(), conv->reference(x3).sizes());
  EXPECT_LT(relError(conv->run(x3), conv->reference(x3)), 1e-5);
  // Linears: no input features give the bias (then the activation); no rows, an empty result.
  auto lin0 = c10::make_intrusive<PackedLinear>(at::randn({5, 0}), at::randn({5}), "relu");
  const at::Tensor b = lin0->run(at::randn({2, 0}));
  EXPECT_TRUE(at::equal(b, at::relu(lin0->bias->expand({2, 5}))));
  auto lin = c10::make_intrusive<PackedLinear>(at::randn({5, 3}), at::randn({5}), "none");
  EXPECT_EQ(lin->run(at::randn({0, 3})).sizes(), (std::vector<std::int64_t>{0, 5}));
  EXPECT_EQ(lin->run(at::randn({3})).sizes(), (std::vector<std::int64_t>{5}));
  EXPECT_THROW(lin->run(at::scalar_tensor(1.0)), c10::Error) << "0-D";
  EXPECT_THROW(lin->run(at::randn({2, 4})), c10::Error) << "features";
}

TEST(PackedOps, EachOpKeepsAtMostItsCacheOfInputShapes) {
  setPackedCacheCapacity(4);
  auto conv = makeConv(kConvs[0]);
  for (std::int64_t s = 8; s < 28; ++s)
    ASSERT_LT(relError(conv->run(at::randn({1, 16, s, s + 1})),
                       conv->reference(at::randn({1, 16, s, s + 1}).fill_(1))),
              1e9); // runs; values are checked elsewhere
  EXPECT_EQ(conv->preparedShapes(), 4u);
  EXPECT_GE(conv->packedWeights(), 1u);
  EXPECT_LE(conv->packedWeights(), conv->preparedShapes());
  // A shape evicted and seen again is prepared again and still right.
  const at::Tensor x = at::randn({1, 16, 8, 9});
  EXPECT_LT(relError(conv->run(x), conv->reference(x)), 1e-5);
  auto linear = c10::make_intrusive<PackedLinear>(at::randn({16, 32}), c10::nullopt, "none");
  for (std::int64_t rows = 1; rows < 30; ++rows)
    linear->run(at::randn({rows, 32}));
  EXPECT_EQ(linear->preparedShapes(), 4u);
  setPackedCacheCapacity(8);
  EXPECT_THROW(setPackedCacheCapacity(0), c10::Error);
}
