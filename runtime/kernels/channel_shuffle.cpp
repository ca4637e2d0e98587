// xalloc::channel_shuffle: ShuffleNet's channel shuffle (`x.view(b, g, c // g, h, w)`,
// `transpose(1, 2).contiguous()`, `view(b, -1, h, w)`) as xrewrite writes it after a
// channels-last region (tspass::shuffleChannelsInPlace): ATen's aten::channel_shuffle, which
// keeps a channels-last input channels-last and so spares the region its exit conversion, with
// the same elements. ATen 1.13 gives that op no derivative, so an input that wants gradients, and
// anything but a 4-D tensor whose channels the groups divide, takes the idiom's own ATen ops: the
// original's gradients and the original's errors.
//
// Two groups of a channels-last float input (every ShuffleNetV2 shuffle) are the runtime's own:
// each pixel's two halves interleaved with AVX-512 permutes (elsewhere plain loops the compiler
// vectorizes for AVX2 or the baseline). ATen's channels-last kernel copies
// the channels one group slice at a time and took ~19 us a shuffle at batch 1, 11% of
// ShuffleNetV2's time. A shuffle moves elements only, so the result is ATen's bit for bit.
#include <algorithm>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "dispatch.h"
#include "packed_checks.h"

namespace xalloc::runtime {

#if defined(__x86_64__)
// Pixels [begin, end) of `c` channels each: out[2j] = in[j], out[2j + 1] = in[c / 2 + j].
__attribute__((target("avx512f"))) void interleaveHalvesAvx512(const float* in, float* out,
                                                               std::int64_t c, std::int64_t begin,
                                                               std::int64_t end) {
  const std::int64_t half = c / 2;
  const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  for (std::int64_t p = begin; p < end; ++p) {
    const float* a = in + p * c;
    const float* b = a + half;
    float* o = out + p * c;
    std::int64_t j = 0;
    for (; j + 16 <= half; j += 16) {
      const __m512 va = _mm512_loadu_ps(a + j), vb = _mm512_loadu_ps(b + j);
      _mm512_storeu_ps(o + 2 * j, _mm512_permutex2var_ps(va, lo, vb));
      _mm512_storeu_ps(o + 2 * j + 16, _mm512_permutex2var_ps(va, hi, vb));
    }
    if (j < half) {
      const std::int64_t n = half - j; // 1..15 pairs: 2n outputs
      const auto in_mask = static_cast<__mmask16>((1u << n) - 1);
      const __m512 va = _mm512_maskz_loadu_ps(in_mask, a + j);
      const __m512 vb = _mm512_maskz_loadu_ps(in_mask, b + j);
      const std::int64_t first = std::min<std::int64_t>(2 * n, 16), second = 2 * n - first;
      _mm512_mask_storeu_ps(o + 2 * j, static_cast<__mmask16>((1u << first) - 1),
                            _mm512_permutex2var_ps(va, lo, vb));
      if (second > 0)
        _mm512_mask_storeu_ps(o + 2 * j + 16, static_cast<__mmask16>((1u << second) - 1),
                              _mm512_permutex2var_ps(va, hi, vb));
    }
  }
}
#endif

namespace {
// The same interleave as plain loops, which the compiler vectorizes (-O3) for each variant below:
// AVX2 and the baseline, so a CPU without AVX-512 keeps the shuffle channels-last too.
__attribute__((always_inline)) inline void interleaveHalvesOf(const float* __restrict in,
                                                              float* __restrict out, std::int64_t c,
                                                              std::int64_t begin,
                                                              std::int64_t end) {
  const std::int64_t half = c / 2;
  for (std::int64_t p = begin; p < end; ++p) {
    const float* __restrict a = in + p * c;
    const float* __restrict b = a + half;
    float* __restrict o = out + p * c;
    for (std::int64_t j = 0; j < half; ++j) {
      o[2 * j] = a[j];
      o[2 * j + 1] = b[j];
    }
  }
}
} // namespace

#if defined(__x86_64__)
__attribute__((target("avx2"))) void interleaveHalvesAvx2(const float* in, float* out,
                                                          std::int64_t c, std::int64_t begin,
                                                          std::int64_t end) {
  interleaveHalvesOf(in, out, c, begin, end);
}
#endif
void interleaveHalvesBase(const float* in, float* out, std::int64_t c, std::int64_t begin,
                          std::int64_t end) {
  interleaveHalvesOf(in, out, c, begin, end);
}

namespace {

// Two groups of a dense channels-last float tensor, or an undefined tensor when the runtime's
// kernel does not take it.
at::Tensor shuffleTwoGroups(const at::Tensor& x) {
  const auto interleaveHalves = cpuKernels().interleaveHalves;
  if (!interleaveHalves || x.scalar_type() != at::kFloat || !x.device().is_cpu() ||
      !x.is_contiguous(at::MemoryFormat::ChannelsLast) ||
      x.suggest_memory_format() != at::MemoryFormat::ChannelsLast || x.is_neg() || x.numel() == 0)
    return {};
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::ChannelsLast));
  const std::int64_t c = x.size(1), pixels = x.numel() / c;
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  // Tasks of at least ~64 KiB.
  const std::int64_t grain = std::max<std::int64_t>(1, (64 << 10) / (c * 4));
  at::parallel_for(0, pixels, grain, [&](std::int64_t begin, std::int64_t end) {
    interleaveHalves(in, o, c, begin, end);
  });
  return out;
}

at::Tensor channelShuffle(const at::Tensor& x, std::int64_t groups) {
  if (x.dim() == 4 && groups >= 1 && x.size(1) % groups == 0 && x.layout() == at::kStrided &&
      !detail::wantsGradient(x)) {
    if (groups == 2)
      if (at::Tensor y = shuffleTwoGroups(x); y.defined())
        return y;
    return at::channel_shuffle(x, groups);
  }
  const std::int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  return x.view({b, groups, groups == 0 ? 0 : c / groups, h, w})
      .transpose(1, 2)
      .contiguous()
      .view({b, -1, h, w});
}

} // namespace

TORCH_LIBRARY_FRAGMENT(xalloc, m) {
  m.def("channel_shuffle(Tensor x, int groups) -> Tensor", channelShuffle);
}

} // namespace xalloc::runtime
