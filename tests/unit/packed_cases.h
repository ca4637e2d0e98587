// What the packed ops' tests share (test_packed_ops.cpp, test_packed_threads.cpp and the kernels'):
// the convolutions they run, one made with its weights, relative error, and where two results are
// not finite.
#pragma once

#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "xalloc/runtime/packed.h"

namespace xalloc::testing {

using runtime::PackedConv;

struct ConvCase {
  const char* name;
  std::int64_t in, out, k, stride, pad, groups;
  const char* post;
};

// A dense 3x3, a depthwise 3x3 and a pointwise 1x1, as MobileNet and ResNet have them.
inline const ConvCase kConvs[] = {{"dense 3x3", 16, 32, 3, 1, 1, 1, "relu"},
                                  {"depthwise 3x3", 32, 32, 3, 2, 1, 32, "relu6"},
                                  {"pointwise 1x1", 32, 24, 1, 1, 0, 1, "hardsigmoid"},
                                  {"dense 3x3 hardswish", 16, 32, 3, 1, 1, 1, "hardswish"}};

inline c10::intrusive_ptr<PackedConv> makeConv(const ConvCase& c, bool bias = true) {
  at::manual_seed(3);
  at::Tensor w = at::randn({c.out, c.in / c.groups, c.k, c.k}).mul(0.2);
  c10::optional<at::Tensor> b;
  if (bias)
    b = at::randn({c.out});
  return c10::make_intrusive<PackedConv>(w, b, std::vector<std::int64_t>{c.stride, c.stride},
                                         std::vector<std::int64_t>{c.pad, c.pad},
                                         std::vector<std::int64_t>{1, 1}, c.groups, c.post);
}

inline double relError(const at::Tensor& a, const at::Tensor& ref) {
  return (a - ref).abs().max().item<double>() / ref.abs().max().item<double>();
}

// Where each is not finite, and the finite values within `tol` of each other there.
inline void expectSameNonFinite(const at::Tensor& got, const at::Tensor& ref,
                                const std::string& what) {
  const at::Tensor bad_got = at::logical_not(at::isfinite(got));
  const at::Tensor bad_ref = at::logical_not(at::isfinite(ref));
  ASSERT_GT(bad_ref.sum().item<std::int64_t>(), 0) << what << ": the case should make NaN";
  EXPECT_TRUE(at::equal(bad_got, bad_ref))
      << what << ": " << bad_got.sum().item<std::int64_t>() << " non-finite outputs, ATen has "
      << bad_ref.sum().item<std::int64_t>();
  EXPECT_TRUE(at::equal(at::isnan(got), at::isnan(ref))) << what << ": NaN in other places";
  const at::Tensor ok = at::logical_not(bad_ref);
  if (ok.any().item<bool>()) {
    EXPECT_LT(relError(got.masked_select(ok), ref.masked_select(ok)), 1e-5) << what;
  }
}

// conv's output for x at one and at two threads (the caller's count restored): the runtime's
// own kernels give each output one thread's sum, so the two are bit for bit the same.
inline void expectOneResultOnOneAndTwoThreads(PackedConv& conv, const at::Tensor& x) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const at::Tensor one = conv.run(x);
  at::set_num_threads(2);
  const at::Tensor two = conv.run(x);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(one, two));
}

} // namespace xalloc::testing
