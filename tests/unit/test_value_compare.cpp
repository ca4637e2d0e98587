// Comparing model outputs: bit for bit (what xprof's checks and xrewrite's verification ask),
// and by layout (what runs downstream of a consumer can tell).
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <gtest/gtest.h>

#include "xalloc/tspass/value_compare.h"

using namespace xalloc;

TEST(ValueCompare, BitsAndLayouts) {
  auto a = at::randn({4, 6});
  auto t = a.t().contiguous().t(); // same values, column-major strides
  EXPECT_TRUE(xalloc::tspass::bitwiseEqual(c10::IValue(a), c10::IValue(t)));
  EXPECT_FALSE(xalloc::tspass::sameLayout({a}, {t}));
  EXPECT_TRUE(xalloc::tspass::sameLayout({a}, {a.clone()}));
  auto b = a.clone();
  b.view(-1)[5] = std::nextafter(b.view(-1)[5].item<float>(), 1e9f); // one ulp
  EXPECT_FALSE(xalloc::tspass::bitwiseEqual(c10::IValue(a), c10::IValue(b)));
  EXPECT_FALSE(xalloc::tspass::bitwiseEqual(c10::IValue(a), c10::IValue(a.to(at::kDouble))));
  auto nan = at::full({2}, std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(xalloc::tspass::bitwiseEqual(c10::IValue(nan), c10::IValue(nan.clone())));
  auto tup = c10::ivalue::Tuple::create({c10::IValue(a), c10::IValue(int64_t{3})});
  auto tup2 = c10::ivalue::Tuple::create({c10::IValue(t), c10::IValue(int64_t{3})});
  EXPECT_TRUE(xalloc::tspass::bitwiseEqual(c10::IValue(tup), c10::IValue(tup2)));
  EXPECT_FALSE(xalloc::tspass::sameLayout({c10::IValue(tup)}, {c10::IValue(tup2)}));
}

TEST(ValueCompare, DictsCompareByKeyAndValueInOrder) {
  // Detection models return List[Dict[str, Tensor]]: boxes, labels, scores.
  auto make = [](const at::Tensor& boxes, const char* second) {
    c10::Dict<std::string, at::Tensor> d;
    d.insert("boxes", boxes);
    d.insert(second, at::arange(3));
    return c10::IValue(d);
  };
  auto boxes = at::randn({3, 4});
  EXPECT_TRUE(xalloc::tspass::bitwiseEqual(make(boxes, "labels"), make(boxes.clone(), "labels")));
  auto moved = boxes.clone();
  moved[0][0] = moved[0][0].item<float>() + 1.0f;
  EXPECT_FALSE(xalloc::tspass::bitwiseEqual(make(boxes, "labels"), make(moved, "labels")));
  EXPECT_FALSE(xalloc::tspass::bitwiseEqual(make(boxes, "labels"), make(boxes, "scores")));
  c10::Dict<std::string, at::Tensor> empty;
  EXPECT_TRUE(xalloc::tspass::bitwiseEqual(c10::IValue(empty), c10::IValue(empty.copy())));
  EXPECT_FALSE(xalloc::tspass::bitwiseEqual(c10::IValue(empty), make(boxes, "labels")));
  const auto column_major = boxes.t().contiguous().t();
  EXPECT_TRUE(xalloc::tspass::bitwiseEqual(make(boxes, "labels"), make(column_major, "labels")));
  EXPECT_FALSE(xalloc::tspass::sameLayout({make(boxes, "labels")}, {make(column_major, "labels")}));
}

// The tolerance's measure: element by element, each relative to itself with a floor near zero
// (the 10th percentile of |ref| over the elements that changed), the worst over outputs.
TEST(ValueCompare, RelativeErrorIsTheWorstElementsDifferenceOverItself) {
  using xalloc::tspass::maxRelativeError;
  auto a = at::arange(1, 9, at::kFloat).reshape({2, 4}); // max |a| = 8
  EXPECT_EQ(maxRelativeError(a, a.t().contiguous().t()), 0.0);
  auto b = a.clone();
  b[1][3] = 8.5f; // off by 0.5 where |a| is 8: 0.5 / 8
  EXPECT_DOUBLE_EQ(maxRelativeError(a, b), 0.0625);
  b[0][0] = 1.5f; // off by 0.5 where |a| is 1: the element's own size counts, not the largest
  EXPECT_DOUBLE_EQ(maxRelativeError(a, b), 0.5);
  // Per output: the second output's own scale (2), not the first's.
  auto s = at::full({3}, 2.0f), s2 = s.clone();
  s2[0] = 2.2f;
  auto out = c10::ivalue::Tuple::create({c10::IValue(a), c10::IValue(s)});
  auto out2 = c10::ivalue::Tuple::create({c10::IValue(a), c10::IValue(s2)});
  EXPECT_NEAR(maxRelativeError(out, out2), 0.1, 1e-6);
  // NaN and infinities where the reference has them are equal; elsewhere unbounded.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto n = at::tensor({1.0f, nan, inf});
  EXPECT_EQ(maxRelativeError(n, n.clone()), 0.0);
  auto n2 = n.clone();
  n2[0] = nan;
  EXPECT_TRUE(std::isinf(maxRelativeError(n, n2)));
  // Other sizes, other dtypes, unequal integers: unbounded.
  EXPECT_TRUE(std::isinf(maxRelativeError(a, a.reshape({4, 2}))));
  EXPECT_TRUE(std::isinf(maxRelativeError(a, a.to(at::kDouble))));
  auto i = at::arange(4);
  EXPECT_EQ(maxRelativeError(i, i.clone()), 0.0);
  // An element that stays 0 where others change, and one that only becomes non-zero: judged
  // against the floor, not against nothing.
  auto z = at::tensor({0.0f, 1.0f, 2.0f, 3.0f}), z2 = z.clone();
  z2[1] = 1.0f + 1e-6f;
  z2[0] = 1e-6f;
  EXPECT_LT(maxRelativeError(z, z2), 1e-5);
  EXPECT_TRUE(std::isinf(maxRelativeError(i, i + 1)));
  EXPECT_TRUE(std::isinf(maxRelativeError(c10::IValue(int64_t{3}), c10::IValue(int64_t{4}))));
}

// One large element (a logit masked to -1e9), or many, hides nothing: the others are judged
// against themselves. The measure before (over max |ref|) said 7.8e-19 for 40% errors.
TEST(ValueCompare, AMaskedElementHidesNoError) {
  using xalloc::tspass::maxRelativeError;
  at::manual_seed(0);
  for (double masked : {0.001, 0.5, 0.95}) {
    at::Tensor logits = at::randn({4, 1000});
    const at::Tensor mask = at::rand({4, 1000}) < masked;
    logits.masked_fill_(mask, -1e9);
    at::Tensor off = logits * 1.4;
    off.masked_fill_(mask, -1e9);
    EXPECT_GT(maxRelativeError(logits, off), 0.3) << masked << " masked";
    // A reordered sum moves each logit by ~1e-7: well within the default tolerance.
    at::Tensor close = logits + at::randn({4, 1000}).mul(1e-7);
    close.masked_fill_(mask, -1e9);
    EXPECT_LT(maxRelativeError(logits, close), 1e-4) << masked << " masked";
  }
  // Mixed scales: 1e6 and 1 in one output, the small ones 10% off.
  at::Tensor mixed = at::cat({at::rand({500}).add(1).mul(1e6), at::rand({500}).add(1)});
  at::Tensor mixed_off = mixed.clone();
  mixed_off.slice(0, 500).mul_(1.1);
  EXPECT_GT(maxRelativeError(mixed, mixed_off), 0.05);
}

// The measure written as ATen ops (as it was before it became two passes over memory): the
// passes must say exactly what it says, in every layout and floating dtype.
double atenRelativeError(const at::Tensor& ref, const at::Tensor& x) {
  at::Tensor rd = ref.to(at::kDouble).reshape({-1});
  at::Tensor yd = x.to(at::kDouble).reshape({-1});
  const at::Tensor same = (rd.isnan() & yd.isnan()) | (rd.isinf() & (rd == yd));
  rd = at::where(same, at::zeros_like(rd), rd);
  yd = at::where(same, at::zeros_like(yd), yd);
  const at::Tensor diff = (yd - rd).abs();
  const double worst = diff.max().item<double>();
  if (worst == 0)
    return 0;
  if (!std::isfinite(worst))
    return INFINITY;
  const at::Tensor mag = rd.abs();
  const at::Tensor changed = mag.masked_select((diff > 0) & (mag > 0));
  if (changed.numel() == 0)
    return INFINITY;
  const double floor =
      std::get<0>(changed.kthvalue(std::max<std::int64_t>(1, changed.numel() / 10))).item<double>();
  return (diff / at::clamp_min(mag, floor)).max().item<double>();
}

TEST(ValueCompare, TwoPassesSayWhatAtensOpsSay) {
  using xalloc::tspass::maxRelativeError;
  at::manual_seed(3);
  for (const auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    for (double moved : {1e-7, 1e-3, 0.5}) {
      const at::Tensor ref = at::randn({2, 8, 5, 7}).mul(at::rand({2, 8, 5, 7}) < 0.2).to(dtype);
      // Some elements moved (others, the zeros among them, kept), in the other layout.
      const at::Tensor keep = at::rand({2, 8, 5, 7}) < 0.5;
      at::Tensor x =
          at::where(keep, ref.to(at::kDouble), ref.to(at::kDouble) * (1 + moved) + moved * 1e-3)
              .to(dtype)
              .contiguous(at::MemoryFormat::ChannelsLast);
      const double want = atenRelativeError(ref, x);
      EXPECT_DOUBLE_EQ(maxRelativeError(ref, x), want) << dtype << " " << moved;
      x[0][1][2][3] = NAN; // a NaN the reference does not have: unbounded
      EXPECT_TRUE(std::isinf(maxRelativeError(ref, x))) << dtype;
    }
  }
  // Every element that changed was 0 in the reference: unbounded; nothing changed: 0.
  const at::Tensor zeros = at::zeros({6});
  EXPECT_TRUE(std::isinf(maxRelativeError(zeros, zeros + 1e-9)));
  EXPECT_EQ(maxRelativeError(zeros, zeros.clone()), 0.0);
}

TEST(ValueCompare, ConstantOutputsAreTheOnesThatCannotShowAnError) {
  using tspass::constantFloatOutputs;
  EXPECT_TRUE(constantFloatOutputs(at::zeros({1, 1000})));
  EXPECT_TRUE(
      constantFloatOutputs(c10::ivalue::Tuple::create({at::zeros({4}), at::full({3}, 2.5)})));
  EXPECT_TRUE(constantFloatOutputs(at::ones({1}))); // one element: nothing varies
  at::Tensor varying = at::zeros({1, 1000});
  varying.index_put_({0, 7}, 1e-3);
  EXPECT_FALSE(constantFloatOutputs(varying));
  EXPECT_FALSE(constantFloatOutputs(c10::ivalue::Tuple::create({at::zeros({4}), at::arange(3.0)})));
  at::Tensor nan = at::zeros({5});
  nan.index_put_({2}, std::nan(""));
  EXPECT_FALSE(constantFloatOutputs(nan));
  // Nothing floating to judge by: not called constant.
  EXPECT_FALSE(constantFloatOutputs(at::zeros({3}, at::kLong)));
  EXPECT_FALSE(constantFloatOutputs(c10::IValue(3)));
}
