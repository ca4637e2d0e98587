// A product's epilogue: bias and activation over rows of floats in place (epilogue.h).
#include "epilogue.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace xalloc::runtime {

namespace {

template <Activation A> inline float activate(float x) {
  if constexpr (A == Activation::Relu)
    return x < 0.f ? 0.f : x; // NaN stays NaN, as at::relu
  else if constexpr (A == Activation::Silu)
    return x / (1.f + std::exp(-x));
  else if constexpr (A == Activation::Hardswish)
    return x * std::min(std::max(x + 3.f, 0.f), 6.f) / 6.f;
  else if constexpr (A == Activation::Sigmoid)
    return 1.f / (1.f + std::exp(-x));
  else if constexpr (A == Activation::Relu6)
    return x <= 0.f ? 0.f : (x >= 6.f ? 6.f : x); // at::hardtanh's order: NaN stays NaN
  else if constexpr (A == Activation::Hardsigmoid)
    return std::min(std::max(x + 3.f, 0.f), 6.f) / 6.f;
  else
    return x;
}

template <Activation A>
void rowsBase(float* c, std::int64_t rows, std::int64_t n, std::int64_t ld, const float* bias) {
  for (std::int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ld;
    for (std::int64_t j = 0; j < n; ++j)
      row[j] = activate<A>(bias ? row[j] + bias[j] : row[j]);
  }
}

#if defined(__x86_64__)
// exp(-x), 8 lanes. -x is clamped to [-87.34, 88.73] (MINPS and MAXPS return their second
// operand when one is NaN, so NaN stays NaN): 2^n is then one shift into the exponent, n = 128
// gives inf (exp(88.73) does overflow), and exp(-87.34) is below what 1 + exp ever keeps.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 expOfNegative(__m256 x) {
  __m256 t = _mm256_xor_ps(x, _mm256_set1_ps(-0.f));
  t = _mm256_min_ps(_mm256_set1_ps(88.7228394f), t);
  t = _mm256_max_ps(_mm256_set1_ps(-87.3365402f), t);
  // n = round(t / ln2) in the low bits of 1.5 * 2^23 + 127 + n; t = n ln2 + r, |r| <= ln2 / 2,
  // ln2 in two parts so that r is exact.
  const __m256 magic = _mm256_set1_ps(12582912.f + 127.f);
  const __m256 nm = _mm256_fmadd_ps(t, _mm256_set1_ps(1.44269504088896341f), magic);
  const __m256 n = _mm256_sub_ps(nm, magic);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), t);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  // 2^n: the biased exponent n + 127 (1 to 255) shifted into place.
  return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(nm), 23)));
}

template <Activation A>
__attribute__((target("avx2,fma"), always_inline)) inline __m256 activate8(__m256 x) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 one = _mm256_set1_ps(1.f);
  const __m256 three = _mm256_set1_ps(3.f);
  const __m256 six = _mm256_set1_ps(6.f);
  if constexpr (A == Activation::Relu)
    return _mm256_max_ps(zero, x); // x where x is NaN
  else if constexpr (A == Activation::Silu)
    return _mm256_div_ps(x, _mm256_add_ps(one, expOfNegative(x)));
  else if constexpr (A == Activation::Hardswish)
    return _mm256_div_ps(
        _mm256_mul_ps(x, _mm256_min_ps(six, _mm256_max_ps(zero, _mm256_add_ps(x, three)))), six);
  else if constexpr (A == Activation::Sigmoid)
    return _mm256_div_ps(one, _mm256_add_ps(one, expOfNegative(x)));
  else if constexpr (A == Activation::Relu6)
    return _mm256_min_ps(six, _mm256_max_ps(zero, x));
  else if constexpr (A == Activation::Hardsigmoid)
    return _mm256_div_ps(_mm256_min_ps(six, _mm256_max_ps(zero, _mm256_add_ps(x, three))), six);
  else
    return x;
}

template <Activation A>
__attribute__((target("avx2,fma"))) void rowsAvx2(float* c, std::int64_t rows, std::int64_t n,
                                                  std::int64_t ld, const float* bias) {
  const std::int64_t whole = n / 8 * 8;
  alignas(32) std::int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  const __m256i tail =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes + 8 - (n - whole)));
  for (std::int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ld;
    std::int64_t j = 0;
    if (bias)
      for (; j < whole; j += 8)
        _mm256_storeu_ps(row + j, activate8<A>(_mm256_add_ps(_mm256_loadu_ps(row + j),
                                                             _mm256_loadu_ps(bias + j))));
    else
      for (; j < whole; j += 8)
        _mm256_storeu_ps(row + j, activate8<A>(_mm256_loadu_ps(row + j)));
    if (j < n) {
      __m256 x = _mm256_maskload_ps(row + j, tail);
      if (bias)
        x = _mm256_add_ps(x, _mm256_maskload_ps(bias + j, tail));
      _mm256_maskstore_ps(row + j, tail, activate8<A>(x));
    }
  }
}
#endif

template <template <Activation> class F>
void byActivation(Activation a, float* c, std::int64_t rows, std::int64_t n, std::int64_t ld,
                  const float* bias) {
  switch (a) {
  case Activation::None:
    return F<Activation::None>::run(c, rows, n, ld, bias);
  case Activation::Relu:
    return F<Activation::Relu>::run(c, rows, n, ld, bias);
  case Activation::Silu:
    return F<Activation::Silu>::run(c, rows, n, ld, bias);
  case Activation::Hardswish:
    return F<Activation::Hardswish>::run(c, rows, n, ld, bias);
  case Activation::Sigmoid:
    return F<Activation::Sigmoid>::run(c, rows, n, ld, bias);
  case Activation::Relu6:
    return F<Activation::Relu6>::run(c, rows, n, ld, bias);
  case Activation::Hardsigmoid:
    return F<Activation::Hardsigmoid>::run(c, rows, n, ld, bias);
  }
}

template <Activation A> struct Base {
  static void run(float* c, std::int64_t rows, std::int64_t n, std::int64_t ld, const float* b) {
    if (A != Activation::None || b)
      rowsBase<A>(c, rows, n, ld, b);
  }
};

#if defined(__x86_64__)
template <Activation A> struct Avx2 {
  static void run(float* c, std::int64_t rows, std::int64_t n, std::int64_t ld, const float* b) {
    if (A != Activation::None || b)
      rowsAvx2<A>(c, rows, n, ld, b);
  }
};
#endif

} // namespace

void biasActivateRowsBase(float* c, std::int64_t rows, std::int64_t n, std::int64_t ld,
                          const float* bias, Activation a) {
  byActivation<Base>(a, c, rows, n, ld, bias);
}

#if defined(__x86_64__)
void biasActivateRowsAvx2(float* c, std::int64_t rows, std::int64_t n, std::int64_t ld,
                          const float* bias, Activation a) {
  byActivation<Avx2>(a, c, rows, n, ld, bias);
}
#endif

std::optional<Activation> epilogueActivation(PostOp p) {
  switch (p) {
  case PostOp::None:
    return Activation::None;
  case PostOp::Relu:
    return Activation::Relu;
  case PostOp::Silu:
    return Activation::Silu;
  case PostOp::Hardswish:
    return Activation::Hardswish;
  case PostOp::Sigmoid:
    return Activation::Sigmoid;
  case PostOp::Relu6:
    return Activation::Relu6;
  case PostOp::Hardsigmoid:
    return Activation::Hardsigmoid;
  case PostOp::Gelu:
  case PostOp::Tanh:
    break;
  }
  return std::nullopt;
}

void biasActivate(float* c, std::int64_t rows, std::int64_t n, std::int64_t ld, const float* bias,
                  Activation a) {
  if (rows > 0 && n > 0)
    cpuKernels().biasActivateRows(c, rows, n, ld, bias, a);
}

} // namespace xalloc::runtime
