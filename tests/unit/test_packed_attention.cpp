// xalloc::attention_packed keeps the packed ops' contract (packed.h, docs/runtime-ops.md) for
// nn.MultiheadAttention's fast path: within float rounding of ATen's
// _native_multi_head_attention on the shapes it takes (head sizes that are and are not powers of
// two, one token, a batch); everything else (a mask, the weights wanted, another key, another
// dtype, NaN, infinity, huge inputs, gradients) is ATen's own result, bit for bit, or ATen's
// error; many threads at once; bad weights refused at construction; the per-shape cache bounded.
#include <atomic>
#include <limits>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "xalloc/runtime/packed.h"

using namespace xalloc::runtime;

namespace {

struct Weights {
  std::int64_t e, h;
  at::Tensor qkv_w, qkv_b, proj_w, proj_b;
};

Weights weights(std::int64_t e, std::int64_t h, std::uint64_t seed = 7) {
  at::manual_seed(seed);
  const double s = 1.0 / std::sqrt(static_cast<double>(e));
  return {e,
          h,
          at::randn({3 * e, e}).mul(s),
          at::randn({3 * e}).mul(0.1),
          at::randn({e, e}).mul(s),
          at::randn({e}).mul(0.1)};
}

c10::intrusive_ptr<PackedAttention> pack(const Weights& w) {
  return c10::make_intrusive<PackedAttention>(w.e, w.h, w.qkv_w, w.qkv_b, w.proj_w, w.proj_b);
}

std::tuple<at::Tensor, at::Tensor> aten(const Weights& w, const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v,
                                        const c10::optional<at::Tensor>& mask = c10::nullopt,
                                        bool need_weights = false) {
  // nn.MultiheadAttention passes a key padding mask ([batch, tokens]) as mask type 1.
  const c10::optional<std::int64_t> type = mask ? c10::optional<std::int64_t>(1) : c10::nullopt;
  return at::_native_multi_head_attention(q, k, v, w.e, w.h, w.qkv_w, w.qkv_b, w.proj_w, w.proj_b,
                                          mask, need_weights, true, type);
}

at::Tensor fast(PackedAttention& a, const at::Tensor& x) {
  return std::get<0>(a.run(x, x, x, c10::nullopt, false, true, c10::nullopt));
}

double relError(const at::Tensor& a, const at::Tensor& ref) {
  return (a - ref).abs().max().item<double>() / ref.abs().max().item<double>();
}

// Bitwise equal, NaN where NaN is (at::equal says NaN != NaN).
bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined())
    return a.defined() == b.defined();
  return a.sizes().equals(b.sizes()) && a.scalar_type() == b.scalar_type() &&
         at::equal(at::isnan(a), at::isnan(b)) &&
         at::equal(at::nan_to_num(a, 0.0, 1.0, -1.0), at::nan_to_num(b, 0.0, 1.0, -1.0));
}

} // namespace

TEST(PackedAttention, MatchesATensFastPathWithinRounding) {
  // (embed, heads): ViT-B's 64 per head; 24 per head (the scale is not a power of two); 1 head.
  for (auto [e, h] : {std::pair<std::int64_t, std::int64_t>{96, 4}, {72, 3}, {16, 1}}) {
    const Weights w = weights(e, h);
    auto a = pack(w);
    for (auto [b, t] : {std::pair<std::int64_t, std::int64_t>{1, 17}, {3, 5}, {2, 1}}) {
      const at::Tensor x = at::randn({b, t, e});
      auto [out, attn] = a->run(x, x, x, c10::nullopt, false, true, c10::nullopt);
      const at::Tensor ref = std::get<0>(aten(w, x, x, x));
      ASSERT_TRUE(out.sizes().equals(ref.sizes())) << e << "/" << h << " at " << b << "x" << t;
      EXPECT_LT(relError(out, ref), 1e-5) << e << "/" << h << " at " << b << "x" << t;
      EXPECT_FALSE(attn.defined()) << "no weights asked for: ATen's second output is undefined";
    }
  }
  // A query that is a view (not contiguous) is read as ATen reads it.
  const Weights w = weights(32, 2);
  auto a = pack(w);
  const at::Tensor x = at::randn({6, 2, 32}).transpose(0, 1);
  EXPECT_LT(relError(fast(*a, x), std::get<0>(aten(w, x, x, x))), 1e-5);
}

TEST(PackedAttention, EveryOtherCaseIsATensOwnResult) {
  const Weights w = weights(32, 4);
  auto a = pack(w);
  const at::Tensor x = at::randn({2, 5, 32}), y = at::randn({2, 5, 32});
  auto expectATen = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const c10::optional<at::Tensor>& mask, bool need, const char* what) {
    const c10::optional<std::int64_t> type = mask ? c10::optional<std::int64_t>(1) : c10::nullopt;
    auto [o, wts] = a->run(q, k, v, mask, need, true, type);
    auto [ro, rw] = aten(w, q, k, v, mask, need);
    EXPECT_TRUE(sameBits(o, ro)) << what;
    EXPECT_TRUE(sameBits(wts, rw)) << what;
  };
  expectATen(x, x, x, c10::nullopt, true, "the attention weights wanted");
  expectATen(x, y, y, c10::nullopt, false, "another key and value");
  expectATen(x, x, y, c10::nullopt, false, "another value");
  const at::Tensor mask = at::rand({2, 5}).gt(0.7);
  expectATen(x, x, x, mask, false, "a padding mask");
  // NaN and infinity propagate exactly as ATen's: row by row through the softmax.
  at::Tensor nan = x.clone();
  nan[0][2][3] = std::numeric_limits<float>::quiet_NaN();
  expectATen(nan, nan, nan, c10::nullopt, false, "a NaN");
  at::Tensor inf = x.clone();
  inf[1][4][0] = std::numeric_limits<float>::infinity();
  expectATen(inf, inf, inf, c10::nullopt, false, "an infinity");
  // So large that another order of summation could overflow where ATen's does not.
  const at::Tensor huge = x.mul(1e18);
  expectATen(huge, huge, huge, c10::nullopt, false, "1e18");
  // Empty: ATen's empty output.
  const at::Tensor none = at::randn({0, 5, 32});
  expectATen(none, none, none, c10::nullopt, false, "an empty batch");
  // What ATen refuses is refused, in ATen's words.
  const at::Tensor d = x.to(at::kDouble);
  EXPECT_THROW(a->run(d, d, d, c10::nullopt, false, true, c10::nullopt), c10::Error) << "f64";
  const at::Tensor wrong = at::randn({2, 5, 16});
  try {
    a->run(wrong, wrong, wrong, c10::nullopt, false, true, c10::nullopt);
    ADD_FAILURE() << "a query of 16 features for an embedding of 32 was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("didn't match last dim of query"), std::string::npos)
        << e.what();
  }
  const at::Tensor flat = at::randn({5, 32});
  EXPECT_THROW(a->run(flat, flat, flat, c10::nullopt, false, true, c10::nullopt), c10::Error);
}

TEST(PackedAttention, GradientsAreATens) {
  // ATen's op has no derivative: with gradients wanted the runtime gives what ATen gives (an
  // output whose backward says so), never a detached result that silently has no gradient.
  const Weights w = weights(16, 2);
  auto a = pack(w);
  const at::Tensor x = at::randn({1, 4, 16}).requires_grad_(true);
  at::Tensor out = fast(*a, x);
  EXPECT_TRUE(out.requires_grad());
  EXPECT_THROW(out.sum().backward(), std::exception);
  {
    c10::NoGradGuard no_grad;
    EXPECT_LT(relError(fast(*a, x), std::get<0>(aten(w, x, x, x))), 1e-5);
  }
}

TEST(PackedAttention, ManyThreadsAtOnceGiveOneThreadsResults) {
  const Weights w = weights(64, 4);
  auto a = pack(w);
  std::vector<at::Tensor> xs, refs;
  for (std::int64_t t : {7, 1, 13, 7}) {
    xs.push_back(at::randn({2, t, 64}));
    refs.push_back(std::get<0>(aten(w, xs.back(), xs.back(), xs.back())));
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < xs.size(); ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k)
        if (relError(fast(*a, xs[i]), refs[i]) > 1e-5)
          ++wrong;
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(PackedAttention, BadWeightsAreRefusedAtConstruction) {
  const Weights w = weights(32, 4);
  auto make = [&](std::int64_t e, std::int64_t h, at::Tensor qw, at::Tensor qb, at::Tensor pw,
                  at::Tensor pb) {
    return c10::make_intrusive<PackedAttention>(e, h, qw, qb, pw, pb);
  };
  EXPECT_THROW(make(32, 5, w.qkv_w, w.qkv_b, w.proj_w, w.proj_b), c10::Error) << "5 heads of 32";
  EXPECT_THROW(make(32, 0, w.qkv_w, w.qkv_b, w.proj_w, w.proj_b), c10::Error) << "no heads";
  EXPECT_THROW(make(-32, 4, w.qkv_w, w.qkv_b, w.proj_w, w.proj_b), c10::Error) << "negative";
  EXPECT_THROW(make(16, 4, w.qkv_w, w.qkv_b, w.proj_w, w.proj_b), c10::Error) << "other embed";
  EXPECT_THROW(make(32, 4, w.qkv_w.t(), w.qkv_b, w.proj_w, w.proj_b), c10::Error) << "qkv^T";
  EXPECT_THROW(make(32, 4, w.qkv_w, w.qkv_b.narrow(0, 0, 90), w.proj_w, w.proj_b), c10::Error);
  EXPECT_THROW(make(32, 4, w.qkv_w, w.qkv_b, w.proj_w.narrow(0, 0, 31), w.proj_b), c10::Error);
  EXPECT_THROW(make(32, 4, w.qkv_w, w.qkv_b, w.proj_w, at::randn({32, 1})), c10::Error);
  EXPECT_THROW(make(32, 4, w.qkv_w.to(at::kDouble), w.qkv_b, w.proj_w, w.proj_b), c10::Error);
  EXPECT_THROW(make(32, 4, w.qkv_w, w.qkv_b, w.proj_w, at::Tensor()), c10::Error) << "undefined";
}

TEST(PackedAttention, KeepsAtMostItsCacheOfShapes) {
  setPackedCacheCapacity(3);
  const Weights w = weights(16, 2);
  auto a = pack(w);
  for (std::int64_t t = 1; t <= 10; ++t) {
    const at::Tensor x = at::randn({1, t, 16});
    EXPECT_LT(relError(fast(*a, x), std::get<0>(aten(w, x, x, x))), 1e-5) << t << " tokens";
  }
  EXPECT_LE(a->preparedShapes(), 3u);
  setPackedCacheCapacity(8);
}

TEST(PackedAttention, TheOpAndItsPickleAreRegistered) {
  const auto& ops =
      torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString("xalloc::attention_packed"));
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0]->schema().returns().size(), 2u);
  const Weights w = weights(32, 4);
  auto a = pack(w);
  auto [e, h, qw, qb, pw, pb] = a->state();
  auto b = c10::make_intrusive<PackedAttention>(e, h, qw, qb, pw, pb);
  const at::Tensor x = at::randn({2, 3, 32});
  EXPECT_TRUE(at::equal(fast(*a, x), fast(*b, x))) << "the state makes the same op again";
}
