// SiLU in place in one AVX-512 pass (silu_pass.h).
#include "silu_pass.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include "dispatch.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace xalloc::runtime {

#if defined(__x86_64__)
namespace {

// exp(-x), 16 lanes. -x is clamped to [-104, 89] first, NaN kept (MINPS and MAXPS return their
// second operand when one is NaN): exp(89) overflows to inf and exp(-104) is 0, as the unclamped
// values would, and the reduction below stays finite.
// (The all-lanes masked forms: GCC 12 warns that the unmasked ones read an uninitialized value.)
__attribute__((target("avx512f"), always_inline)) inline __m512 expOfNegative(__m512 x) {
  constexpr __mmask16 all = 0xFFFF;
  __m512 t = _mm512_sub_ps(_mm512_setzero_ps(), x);
  t = _mm512_mask_min_ps(t, all, _mm512_set1_ps(89.f), t);
  t = _mm512_mask_max_ps(t, all, _mm512_set1_ps(-104.f), t);
  // t = n ln2 + r, |r| <= ln2 / 2; ln2 in two parts so that r is exact.
  const __m512 n =
      _mm512_mask_roundscale_ps(t, all, _mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), t);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_mask_scalef_ps(p, all, p,
                               n); // p * 2^n: inf past the range, 0 (or a subnormal) below it
}

} // namespace

__attribute__((target("avx512f"))) void siluRangeAvx512(float* p, std::int64_t n) {
  const __m512 one = _mm512_set1_ps(1.f);
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(p + i);
    _mm512_storeu_ps(p + i, _mm512_div_ps(x, _mm512_add_ps(one, expOfNegative(x))));
  }
  if (i < n) {
    const auto m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, p + i);
    _mm512_mask_storeu_ps(p + i, m, _mm512_div_ps(x, _mm512_add_ps(one, expOfNegative(x))));
  }
}

#endif

void siluInPlace(float* p, std::int64_t n) {
  const auto siluRange = cpuKernels().siluRange;
  TORCH_INTERNAL_ASSERT(siluRange, "xalloc: the SiLU pass needs AVX-512F");
  constexpr std::int64_t kGrain = 1 << 15; // floats a task: 128 KiB
  at::parallel_for(0, n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    siluRange(p + begin, end - begin);
  });
}

bool hasSiluPass() {
  return cpuKernels().siluRange != nullptr;
}

} // namespace xalloc::runtime
