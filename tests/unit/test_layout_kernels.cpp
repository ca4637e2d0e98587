// The runtime's layout kernels, which move elements only and so must give ATen's result bit for
// bit, under its rules; built under ASan+UBSan too (`xalloc_asan_tests`):
// - NCHW inputs made channels-last (runtime/kernels/channels_last.h), what a packed convolution
// does
//   with an input that is not channels-last: the input itself when it is channels-last already,
//   ATen's own copy for what the kernels do not take;
// - xalloc::channel_shuffle's two groups of channels-last floats
// (runtime/kernels/channel_shuffle.cpp).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "../../runtime/kernels/channels_last.h"

using xalloc::runtime::toChannelsLast;

namespace {

void expectATens(const at::Tensor& x) {
  SCOPED_TRACE(::testing::PrintToString(x.sizes()));
  const at::Tensor want = x.contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor got = toChannelsLast(x);
  EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_EQ(got.sizes(), x.sizes());
  EXPECT_EQ(got.scalar_type(), x.scalar_type());
  // Bit for bit, NaN payloads and signed zeros included.
  if (x.scalar_type() == at::kFloat) {
    EXPECT_TRUE(at::equal(got.view(at::kInt), want.view(at::kInt)));
  } else {
    EXPECT_TRUE(at::equal(got, want));
  }
}

} // namespace

TEST(ToChannelsLast, ATensValuesForEveryChannelCountAndTail) {
  at::manual_seed(3);
  // Three channels (the interleave: pixel counts with and without a tail of 16), sixteen and
  // more (the transpose), and the counts between (ATen's own copy); batches of 1 to 3.
  for (std::int64_t c : {3, 5, 16, 24, 58})
    for (std::int64_t n : {1, 3})
      for (auto hw : {std::pair<std::int64_t, std::int64_t>{224, 224}, {7, 9}, {1, 5}, {65, 65}}) {
        at::Tensor x = at::randn({n, c, hw.first, hw.second});
        x.view(-1)[0] = NAN;
        x.view(-1)[x.numel() - 1] = -0.f;
        expectATens(x);
      }
  // Split between threads.
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  expectATens(at::randn({4, 3, 300, 200}));
  expectATens(at::randn({4, 64, 40, 40}));
  at::set_num_threads(threads);
}

TEST(ToChannelsLast, ATensRulesForWhatTheKernelsDoNotTake) {
  // Channels-last already: the input itself, as aten::contiguous returns it.
  const at::Tensor cl = at::randn({2, 3, 8, 8}).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_TRUE(toChannelsLast(cl).is_same(cl));
  // A strided view, another dtype, an empty batch, another rank.
  expectATens(at::randn({2, 6, 9, 9}).slice(1, 0, 3));
  expectATens(at::randn({2, 3, 9, 9}, at::kDouble));
  expectATens(at::randn({0, 3, 9, 9}));
  expectATens(at::randn({0, 32, 9, 9}));
  EXPECT_THROW(toChannelsLast(at::ones({3, 9, 9})), c10::Error) << "ATen's error: not 4-D";
  // Gradients: ATen's conversion, recorded.
  const at::Tensor g = at::randn({1, 3, 8, 8}).requires_grad_(true);
  const at::Tensor y = toChannelsLast(g);
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_TRUE(at::equal(g.grad(), at::ones_like(g)));
}

TEST(ShuffleKernel, TwoGroupsOfChannelsLastFloatsAreATensBitForBit) {
  // The runtime's own interleave of the halves: half counts below, at and past a register's
  // 16 (the masked tail), ShuffleNetV2's 58, 116 and 232; NaN payloads and signed zeros kept.
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow("xalloc::channel_shuffle", "");
  auto shuffle = [&](const at::Tensor& t, std::int64_t g) {
    return op.typed<at::Tensor(const at::Tensor&, std::int64_t)>().call(t, g);
  };
  c10::NoGradGuard no_grad;
  const int threads = at::get_num_threads();
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    for (std::int64_t c : {2, 4, 30, 32, 34, 62, 116, 232, 464})
      for (std::int64_t n : {1, 3}) {
        SCOPED_TRACE(::testing::Message() << c << " channels, batch " << n << ", " << t);
        at::Tensor nhwc = at::randn({n, 7, 5, c});
        nhwc.view(-1)[1] = NAN;
        nhwc.view(-1)[2] = -0.f;
        const at::Tensor x = nhwc.permute({0, 3, 1, 2}); // channels-last
        const at::Tensor want = at::channel_shuffle(x, 2);
        const at::Tensor got = shuffle(x, 2);
        EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
        EXPECT_TRUE(at::equal(got.view(at::kInt), want.view(at::kInt)));
      }
    // Other groups and layouts: ATen's op, as before.
    const at::Tensor nchw = at::randn({2, 12, 3, 3});
    EXPECT_TRUE(at::equal(shuffle(nchw, 2), at::channel_shuffle(nchw, 2)));
    const at::Tensor three = at::randn({2, 12, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast);
    EXPECT_TRUE(at::equal(shuffle(three, 3), at::channel_shuffle(three, 3)));
  }
  at::set_num_threads(threads);
}
