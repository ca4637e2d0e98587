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
//
// xalloc::cat_shuffle(a, b) and xalloc::cat_shuffle_chunk(a, b): a ShuffleNetV2 unit's end,
// `channel_shuffle(cat([a, b], 1), 2)`, and with it the next unit's `chunk(2, 1)` (its two
// halves, each dense), as tspass::fuseCatShuffles writes them. The unit's pass-through half (a
// slice of the last shuffle's channels) was copied dense, then concatenated, then shuffled, and
// the other half copied dense again for its convolution: four copies of the activation where
// one interleave of a and b pair by pair makes each half. The same elements, bit for bit; a and
// b of other shapes, types or layouts take the ops' own path.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

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
// Pixels [begin, end): out[2j] = a[j], out[2j + 1] = b[j] (dispatch.h's PairInterleave).
__attribute__((target("avx512f"))) void
interleavePairsAvx512(const PairInterleave& k, std::int64_t begin, std::int64_t end) {
  const std::int64_t half = k.pairs;
  const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  for (std::int64_t p = begin; p < end; ++p) {
    const float* a = k.a + p * k.a_stride;
    const float* b = k.b + p * k.b_stride;
    float* o = k.out + p * k.out_stride;
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
__attribute__((always_inline)) inline void interleavePairsOf(const PairInterleave& k,
                                                             std::int64_t begin, std::int64_t end) {
  for (std::int64_t p = begin; p < end; ++p) {
    const float* __restrict a = k.a + p * k.a_stride;
    const float* __restrict b = k.b + p * k.b_stride;
    float* __restrict o = k.out + p * k.out_stride;
    for (std::int64_t j = 0; j < k.pairs; ++j) {
      o[2 * j] = a[j];
      o[2 * j + 1] = b[j];
    }
  }
}
} // namespace

#if defined(__x86_64__)
__attribute__((target("avx2"))) void interleavePairsAvx2(const PairInterleave& k,
                                                         std::int64_t begin, std::int64_t end) {
  interleavePairsOf(k, begin, end);
}
#endif
void interleavePairsBase(const PairInterleave& k, std::int64_t begin, std::int64_t end) {
  interleavePairsOf(k, begin, end);
}

namespace {

// Bytes of output a thread's task is worth. After a convolution that ran on two threads, each
// half of the pixels is mostly in the cache of the core that wrote it: split so, ShuffleNetV2 at
// two threads ran 3.04 ms a call, against 3.40 with tasks of 512 KiB (one thread for its
// shuffles), 3.21 with 16 KiB (two threads, alternating processes, this 2-core VM).
constexpr std::int64_t kTaskBytes = 64 << 10;

std::int64_t grainOf(std::int64_t channels) {
  return std::max<std::int64_t>(1,
                                kTaskBytes / (channels * static_cast<std::int64_t>(sizeof(float))));
}

// The distance between consecutive pixels of a 4-D float tensor whose pixels are evenly spaced
// runs of channels (a channels-last tensor, or a slice of one's channels: ShuffleNetV2's chunk),
// or 0 when it is not one the kernel reads.
std::int64_t pixelStride(const at::Tensor& t) {
  if (t.dim() != 4 || t.layout() != at::kStrided || t.scalar_type() != at::kFloat ||
      !t.device().is_cpu() || t.is_neg() || t.is_conj() || t.numel() == 0 ||
      detail::wantsGradient(t))
    return 0;
  const auto n = t.sizes();
  const auto s = t.strides();
  const std::int64_t ps = s[3];
  if (s[1] != 1 || ps < n[1] || s[2] != n[3] * ps || (n[0] > 1 && s[0] != n[2] * s[2]))
    return 0;
  return ps;
}

// shuffle(cat([a, b], 1), 2) by the runtime's kernel, cut into `parts` equal runs of channels
// (chunk(parts, 1)), each a dense channels-last tensor; empty when the kernel does not take them
// (then the ops' own path). Channel 2j of the shuffle is a's channel j, 2j + 1 is b's: each part
// is a run of pairs.
std::vector<at::Tensor> catShuffleParts(const at::Tensor& a, const at::Tensor& b,
                                        std::int64_t parts) {
  const auto interleavePairs = cpuKernels().interleavePairs;
  const std::int64_t as = pixelStride(a), bs = pixelStride(b);
  if (!interleavePairs || as == 0 || bs == 0 || a.sizes() != b.sizes() || a.size(1) % parts != 0)
    return {};
  const std::int64_t c = a.size(1), pairs = c / parts, pixels = a.numel() / c;
  std::vector<at::Tensor> out;
  std::vector<PairInterleave> tasks;
  const float* ap = a.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  for (std::int64_t i = 0; i < parts; ++i) {
    out.push_back(at::empty({a.size(0), 2 * pairs, a.size(2), a.size(3)},
                            a.options().memory_format(at::MemoryFormat::ChannelsLast)));
    tasks.push_back(
        {ap + i * pairs, bp + i * pairs, out.back().data_ptr<float>(), as, bs, 2 * pairs, pairs});
  }
  at::parallel_for(0, pixels, grainOf(2 * c), [&](std::int64_t begin, std::int64_t end) {
    for (const PairInterleave& k : tasks)
      interleavePairs(k, begin, end);
  });
  // Elements moved, none made: a bound both inputs carry holds for every part.
  const std::optional<double> ab = detail::knownBound(a), bb = detail::knownBound(b);
  if (ab && bb)
    for (const at::Tensor& o : out)
      detail::noteBound(o, std::max(*ab, *bb));
  return out;
}

at::Tensor channelShuffle(const at::Tensor& x, std::int64_t groups) {
  if (x.dim() == 4 && groups >= 1 && x.size(1) % groups == 0 && x.layout() == at::kStrided &&
      !detail::wantsGradient(x)) {
    // Two groups: the pair interleave of each pixel's halves (dense channels-last floats).
    if (groups == 2 && x.suggest_memory_format() == at::MemoryFormat::ChannelsLast) {
      const std::int64_t half = x.size(1) / 2;
      if (auto y = catShuffleParts(x.narrow(1, 0, half), x.narrow(1, half, half), 1); !y.empty())
        return y[0];
    }
    return at::channel_shuffle(x, groups);
  }
  const std::int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  return x.view({b, groups, groups == 0 ? 0 : c / groups, h, w})
      .transpose(1, 2)
      .contiguous()
      .view({b, -1, h, w});
}

at::Tensor catShuffle(const at::Tensor& a, const at::Tensor& b) {
  std::vector<at::Tensor> whole = catShuffleParts(a, b, 1);
  return whole.empty() ? channelShuffle(at::cat({a, b}, 1), 2) : whole[0];
}

std::tuple<at::Tensor, at::Tensor> catShuffleChunk(const at::Tensor& a, const at::Tensor& b) {
  std::vector<at::Tensor> halves = catShuffleParts(a, b, 2);
  if (halves.empty()) {
    const at::Tensor whole = channelShuffle(at::cat({a, b}, 1), 2);
    halves = whole.chunk(2, 1);
    TORCH_CHECK(halves.size() == 2, "xalloc::cat_shuffle_chunk: ", whole.size(1), " channels make ",
                halves.size(), " chunk(s), not the 2 the graph unpacks");
  }
  return {halves[0], halves[1]};
}

} // namespace

TORCH_LIBRARY_FRAGMENT(xalloc, m) {
  m.def("channel_shuffle(Tensor x, int groups) -> Tensor", channelShuffle);
  // ShuffleNetV2's unit ends `channel_shuffle(cat([a, b], 1), 2)`, and the next begins with its
  // chunk(2, 1): one pass from a and b (either a slice of channels) to the shuffle, or to its two
  // halves, each dense (tspass::fuseCatShuffles).
  m.def("cat_shuffle(Tensor a, Tensor b) -> Tensor", catShuffle);
  m.def("cat_shuffle_chunk(Tensor a, Tensor b) -> (Tensor, Tensor)", catShuffleChunk);
}

} // namespace xalloc::runtime
