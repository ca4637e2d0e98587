// The scans are integer reductions over the floats' bits (|x| is the bits without the sign; a
// non-finite value has every exponent bit set), which the compiler vectorizes without changing
// any result: integer max is associative, float max would not be (NaN).
#include "finite_scan.h"

#include <algorithm>
#include <cstring>

#include <ATen/Parallel.h>

#include "dispatch.h"

namespace xalloc::runtime {

namespace {
constexpr std::uint32_t kAbsMask = 0x7fffffffu;
constexpr std::uint32_t kInfBits = 0x7f800000u;

// One body, compiled into each variant below (AVX2 and the baseline: kernels.def's maxAbsBits).
__attribute__((always_inline)) inline std::uint32_t maxAbsBitsOf(const std::uint32_t* bits,
                                                                 std::int64_t n) {
  std::uint32_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t a = bits[i] & kAbsMask;
    m = a > m ? a : m;
  }
  return m;
}
} // namespace

#if defined(__x86_64__)
__attribute__((target("avx2"))) std::uint32_t maxAbsBitsAvx2(const std::uint32_t* bits,
                                                             std::int64_t n) {
  return maxAbsBitsOf(bits, n);
}
#endif
std::uint32_t maxAbsBitsBase(const std::uint32_t* bits, std::int64_t n) {
  return maxAbsBitsOf(bits, n);
}

FloatScan scanFloats(const float* p, std::int64_t n) {
  FloatScan s;
  if (n <= 0)
    return s;
  // On the caller's threads (ATen's parallel_reduce: one thread runs it inline), in blocks of
  // 1 MiB: a maximum of integers is the same in any split. A scan is a read at memory speed,
  // and starting a second thread costs ~10 us on this 2-core VM: in blocks of 128 KiB, a 1x1
  // convolution over 16 x 55 x 55 values, run on one thread, took 65 us at two threads against
  // 52 at one, its scan split in two; 52 at both in blocks of 1 MiB.
  const auto* bits = reinterpret_cast<const std::uint32_t*>(p);
  constexpr std::int64_t kGrain = 1 << 18;
  const auto maxAbsBits = cpuKernels().maxAbsBits;
  const std::uint32_t m = at::parallel_reduce(
      std::int64_t{0}, n, kGrain, std::uint32_t{0},
      [&](std::int64_t begin, std::int64_t end, std::uint32_t ident) {
        return std::max(ident, maxAbsBits(bits + begin, end - begin));
      },
      [](std::uint32_t a, std::uint32_t b) { return std::max(a, b); });
  s.finite = m < kInfBits;
  s.has_nan = m > kInfBits;
  if (s.finite)
    std::memcpy(&s.max_abs, &m, sizeof m);
  else if (!s.has_nan)
    s.has_nan = anyNaN(p, n); // the largest is an infinity: a NaN may still be there
  return s;
}

bool anyNaN(const float* p, std::int64_t n) {
  if (n <= 0)
    return false;
  // NaN is the only value whose magnitude bits exceed infinity's; count those in blocks so the
  // loop stays a plain vectorizable reduction.
  const auto* bits = reinterpret_cast<const std::uint32_t*>(p);
  constexpr std::int64_t kBlock = 4096;
  for (std::int64_t i = 0; i < n; i += kBlock) {
    const std::int64_t len = n - i < kBlock ? n - i : kBlock;
    std::uint32_t nan = 0;
    for (std::int64_t j = 0; j < len; ++j)
      nan |= static_cast<std::uint32_t>((bits[i + j] & kAbsMask) > kInfBits);
    if (nan)
      return true;
  }
  return false;
}

} // namespace xalloc::runtime
