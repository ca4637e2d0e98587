// xalloc::max_pool2d (runtime/kernels/pool_nhwc.cpp): ATen's max pooling of channels-last floats,
// bit for bit and NaN included, without the indices ATen computes and drops; every other input
// (dtypes, layouts, gradients, arguments ATen refuses) is ATen's own op, errors and all.
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include "xalloc/runtime/async.h"

using namespace xalloc::runtime;

namespace {
at::Tensor runtimeMaxPool(const at::Tensor& x, std::vector<std::int64_t> k,
                          std::vector<std::int64_t> s, std::vector<std::int64_t> p,
                          std::vector<std::int64_t> d, bool ceil) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("xalloc::max_pool2d", "")
                             .typed<at::Tensor(const at::Tensor&, at::IntArrayRef, at::IntArrayRef,
                                               at::IntArrayRef, at::IntArrayRef, bool)>();
  return op.call(x, k, s, p, d, ceil);
}
} // namespace

TEST(MaxPool, IsATensWithoutTheIndices) {
  ASSERT_GT(loadOps(), 0);
  at::manual_seed(11);
  int cases = 0;
  for (std::int64_t k : {1, 2, 3, 4})
    for (std::int64_t s : {1, 2, 3})
      for (std::int64_t pad = 0; pad <= k / 2; ++pad)
        for (std::int64_t d : {1, 2})
          for (bool ceil : {false, true})
            for (std::int64_t c : {3, 16, 67, 200}) {
              const std::int64_t h = 9 + k, w = 13;
              at::Tensor x = at::randn({2, c, h, w}).contiguous(at::MemoryFormat::ChannelsLast);
              x.index_put_({0, 1, 2, 3}, std::nan(""));
              x.index_put_({1, 0, 4, 4}, -INFINITY);
              x.index_put_({1, 2, 5, 6}, INFINITY);
              // Zeros of both signs side by side: the earlier one stays (ATen's v > m).
              x.index_put_({0, 2, 1, 1}, 0.0);
              x.index_put_({0, 2, 1, 2}, -0.0);
              x.index_put_({0, 2, 2, 1}, -0.0);
              x.index_put_({0, 2, 2, 2}, 0.0);
              x.index_put_({0, 2, 1, 3}, -1.0);
              x.index_put_({0, 2, 2, 3}, -1.0);
              const at::Tensor want = at::max_pool2d(x, {k, k}, {s, s}, {pad, pad}, {d, d}, ceil);
              const at::Tensor got = runtimeMaxPool(x, {k, k}, {s, s}, {pad, pad}, {d, d}, ceil);
              ASSERT_EQ(got.sizes(), want.sizes()) << k << s << pad << d << ceil;
              ASSERT_EQ(got.strides(), want.strides());
              ASSERT_TRUE(at::equal(at::isnan(got), at::isnan(want)));
              ASSERT_TRUE(at::equal(got.view(at::kInt), want.view(at::kInt))) // every bit
                  << "k " << k << " s " << s << " pad " << pad << " d " << d << " ceil " << ceil;
              ++cases;
            }
  EXPECT_EQ(cases, 384); // kernels 1-4 with every padding up to half, 3 strides, 2 dilations
  // A rectangular window, the stride left out (the kernel's), and threads.
  at::Tensor x = at::randn({3, 32, 30, 41}).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_TRUE(at::equal(runtimeMaxPool(x, {3, 2}, {}, {1, 0}, {1, 1}, true),
                        at::max_pool2d(x, {3, 2}, {}, {1, 0}, {1, 1}, true)));
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  at::Tensor big = at::randn({4, 64, 57, 57}).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_TRUE(at::equal(runtimeMaxPool(big, {3, 3}, {2, 2}, {0, 0}, {1, 1}, true),
                        at::max_pool2d(big, {3, 3}, {2, 2}, {0, 0}, {1, 1}, true)));
  at::set_num_threads(threads);
}

TEST(MaxPool, LeavesToATenWhatItDoesNotTake) {
  ASSERT_GT(loadOps(), 0);
  at::Tensor x = at::randn({1, 8, 10, 10});
  // Row-major, double, 3-D: ATen's result and layout.
  EXPECT_TRUE(at::equal(runtimeMaxPool(x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false),
                        at::max_pool2d(x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false)));
  EXPECT_TRUE(runtimeMaxPool(x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false).is_contiguous());
  const at::Tensor xd = x.to(at::kDouble).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_TRUE(at::equal(runtimeMaxPool(xd, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false),
                        at::max_pool2d(xd, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false)));
  EXPECT_TRUE(at::equal(runtimeMaxPool(x[0], {2, 2}, {1, 1}, {0, 0}, {1, 1}, false),
                        at::max_pool2d(x[0], {2, 2}, {1, 1}, {0, 0}, {1, 1}, false)));
  // Arguments ATen refuses are refused with ATen's own words.
  const at::Tensor cl = x.contiguous(at::MemoryFormat::ChannelsLast);
  for (auto bad : std::vector<std::vector<std::int64_t>>{{2, 2, 2}, {0, 2}, {2, -1}}) {
    std::string want, got;
    try {
      at::max_pool2d(cl, bad, {1, 1}, {0, 0}, {1, 1}, false);
    } catch (const c10::Error& e) {
      want = e.what_without_backtrace();
    }
    try {
      runtimeMaxPool(cl, bad, {1, 1}, {0, 0}, {1, 1}, false);
    } catch (const c10::Error& e) {
      got = e.what_without_backtrace();
    }
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(got, want);
  }
  EXPECT_THROW(runtimeMaxPool(cl, {2, 2}, {1, 1}, {2, 2}, {1, 1}, false), c10::Error); // pad > k/2
  EXPECT_THROW(runtimeMaxPool(cl, {11, 11}, {1, 1}, {0, 0}, {1, 1}, false),
               c10::Error); // no output
  // Gradients: ATen's op runs, so the output carries its history and the input gets ATen's.
  at::Tensor g = cl.clone().requires_grad_();
  at::Tensor y = runtimeMaxPool(g, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  at::Tensor g2 = cl.clone().requires_grad_();
  at::max_pool2d(g2, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false).sum().backward();
  EXPECT_TRUE(at::equal(g.grad(), g2.grad()));
}
