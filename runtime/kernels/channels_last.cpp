// NCHW -> NHWC with the runtime's kernels (channels_last.h).
#include "channels_last.h"

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <ATen/Parallel.h>

#include "dispatch.h"
#include "transpose.h"

namespace xalloc::runtime {

#if defined(__x86_64__)
// out[3k + j] = plane j's element k, for k in [0, n). Each 16 pixels of the three planes are 48
// outputs: three registers, each two planes' elements picked by one permute and the third's
// blended in by another.
__attribute__((target("avx512f"))) void
interleave3Avx512(const float* p0, const float* p1, const float* p2, float* out, std::int64_t n) {
  alignas(64) std::int32_t two[3][16];
  alignas(64) std::int32_t third[3][16];
  __mmask16 from_third[3] = {0, 0, 0};
  for (int r = 0; r < 3; ++r)
    for (int q = 0; q < 16; ++q) {
      const int pos = 16 * r + q, plane = pos % 3, k = pos / 3;
      two[r][q] = plane == 1 ? 16 + k : k; // plane 0 from the first source, 1 from the second
      third[r][q] = k;
      if (plane == 2)
        from_third[r] = static_cast<__mmask16>(from_third[r] | (1u << q));
    }
  __m512i idx2[3], idx3[3];
  for (int r = 0; r < 3; ++r) {
    idx2[r] = _mm512_load_si512(two[r]);
    idx3[r] = _mm512_load_si512(third[r]);
  }
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_loadu_ps(p0 + i), b = _mm512_loadu_ps(p1 + i),
                 c = _mm512_loadu_ps(p2 + i);
    float* o = out + 3 * i;
    for (int r = 0; r < 3; ++r)
      _mm512_storeu_ps(o + 16 * r, _mm512_mask_permutexvar_ps(_mm512_permutex2var_ps(a, idx2[r], b),
                                                              from_third[r], idx3[r], c));
  }
  for (; i < n; ++i) {
    out[3 * i] = p0[i];
    out[3 * i + 1] = p1[i];
    out[3 * i + 2] = p2[i];
  }
}
#endif

at::Tensor toChannelsLast(const at::Tensor& x) {
  if (!x.defined() || (x.dim() != 4 && x.dim() != 5))
    return x.contiguous(at::MemoryFormat::ChannelsLast);
  const auto cl = x.dim() == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d;
  if (x.is_contiguous(cl) || !x.is_contiguous() || x.scalar_type() != at::kFloat ||
      x.layout() != at::kStrided || !x.device().is_cpu() || x.is_neg() || x.is_conj() ||
      x.requires_grad() || x.numel() == 0)
    return x.contiguous(cl);
  // The spatial dimensions as one: NCDHW is N, C, (D*H*W) as NCHW is N, C, (H*W).
  const std::int64_t n = x.size(0), c = x.size(1), hw = x.numel() / (n * c);
  if (c != 3 && c < 16)
    return x.contiguous(cl);
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(cl));
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  if (c == 3) {
    if (const auto interleave3 = cpuKernels().interleave3) {
      // Tasks of whole images' stretches: [image, pixels) in chunks of 4096 pixels.
      constexpr std::int64_t kChunk = 4096;
      const std::int64_t chunks = (hw + kChunk - 1) / kChunk;
      at::parallel_for(0, n * chunks, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t) {
          const std::int64_t img = t / chunks, k0 = t % chunks * kChunk;
          const std::int64_t len = std::min(kChunk, hw - k0);
          const float* p = in + img * 3 * hw + k0;
          interleave3(p, p + hw, p + 2 * hw, o + img * 3 * hw + 3 * k0, len);
        }
      });
      return out;
    }
    out.copy_(x);
    return out;
  }
  // The NHWC view of x as batches of the [c, hw] matrix transposed.
  const at::Tensor nhwc = x.reshape({n, c, hw, 1}).permute({0, 2, 3, 1});
  const auto tr = asBatchedTranspose(nhwc.sizes().data(), nhwc.strides().data(), nhwc.dim());
  if (!tr)
    return x.contiguous(cl);
  transpose(in, o, sizeof(float), *tr, /*parallel=*/true);
  return out;
}

} // namespace xalloc::runtime
