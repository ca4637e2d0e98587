// The runtime's own conversion kernel: batched 2-D transposes of 2-, 4- and 8-byte elements.
//
// The tensor is walked in square tiles (64x64 2- or 4-byte elements, 32x32 8-byte ones).
// A tile's source rows are first copied into a buffer in L1: each source row segment is read
// once, from start to end, so the power-of-two row strides common in models (which map every
// row of a tile to the same cache sets) cost no conflict misses. The buffer is then transposed
// into the output by 8x8, 4x4 or 2x2 register transposes. Large outputs are written with
// non-temporal stores: they skip the read-for-ownership of each destination line and do not
// evict the source from the caches. Elements are moved as integers, bit for bit.
#include "transpose.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace xalloc::runtime {

namespace {

// Output size from which stores bypass the caches (about twice a core's L2 here: smaller
// outputs are left in cache for their consumer).
constexpr std::int64_t kStreamBytes = std::int64_t{4} << 20;

template <typename T> constexpr std::int64_t tileFor() {
  return sizeof(T) == 8 ? 32 : 64;
}

#if defined(__SSE2__)
template <bool Stream> inline void store(void* p, __m128i v) {
  if constexpr (Stream)
    _mm_stream_si128(static_cast<__m128i*>(p), v);
  else
    _mm_storeu_si128(static_cast<__m128i*>(p), v);
}

// 8x8 of 2-byte elements.
template <bool Stream>
inline void micro(const std::uint16_t* s, std::int64_t ss, std::uint16_t* d, std::int64_t ds) {
  __m128i r[8];
  for (int k = 0; k < 8; ++k)
    r[k] = _mm_load_si128(reinterpret_cast<const __m128i*>(s + k * ss));
  __m128i a[8], b[8];
  for (int k = 0; k < 4; ++k) {
    a[2 * k] = _mm_unpacklo_epi16(r[2 * k], r[2 * k + 1]);
    a[2 * k + 1] = _mm_unpackhi_epi16(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    b[4 * k] = _mm_unpacklo_epi32(a[4 * k], a[4 * k + 2]);
    b[4 * k + 1] = _mm_unpackhi_epi32(a[4 * k], a[4 * k + 2]);
    b[4 * k + 2] = _mm_unpacklo_epi32(a[4 * k + 1], a[4 * k + 3]);
    b[4 * k + 3] = _mm_unpackhi_epi32(a[4 * k + 1], a[4 * k + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    store<Stream>(d + (2 * k) * ds, _mm_unpacklo_epi64(b[k], b[k + 4]));
    store<Stream>(d + (2 * k + 1) * ds, _mm_unpackhi_epi64(b[k], b[k + 4]));
  }
}
constexpr std::int64_t microFor(const std::uint16_t*) {
  return 8;
}

// 4x4 of 4-byte elements: rows s, s+ss, s+2ss, s+3ss into columns of d.
template <bool Stream>
inline void micro(const std::uint32_t* s, std::int64_t ss, std::uint32_t* d, std::int64_t ds) {
  const __m128i r0 = _mm_load_si128(reinterpret_cast<const __m128i*>(s));
  const __m128i r1 = _mm_load_si128(reinterpret_cast<const __m128i*>(s + ss));
  const __m128i r2 = _mm_load_si128(reinterpret_cast<const __m128i*>(s + 2 * ss));
  const __m128i r3 = _mm_load_si128(reinterpret_cast<const __m128i*>(s + 3 * ss));
  const __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpackhi_epi32(r0, r1);
  const __m128i t2 = _mm_unpacklo_epi32(r2, r3), t3 = _mm_unpackhi_epi32(r2, r3);
  store<Stream>(d, _mm_unpacklo_epi64(t0, t2));
  store<Stream>(d + ds, _mm_unpackhi_epi64(t0, t2));
  store<Stream>(d + 2 * ds, _mm_unpacklo_epi64(t1, t3));
  store<Stream>(d + 3 * ds, _mm_unpackhi_epi64(t1, t3));
}
constexpr std::int64_t microFor(const std::uint32_t*) {
  return 4;
}

// 2x2 of 8-byte elements.
template <bool Stream>
inline void micro(const std::uint64_t* s, std::int64_t ss, std::uint64_t* d, std::int64_t ds) {
  const __m128i r0 = _mm_load_si128(reinterpret_cast<const __m128i*>(s));
  const __m128i r1 = _mm_load_si128(reinterpret_cast<const __m128i*>(s + ss));
  store<Stream>(d, _mm_unpacklo_epi64(r0, r1));
  store<Stream>(d + ds, _mm_unpackhi_epi64(r0, r1));
}
constexpr std::int64_t microFor(const std::uint64_t*) {
  return 2;
}
#endif

// One tile: out rows [i0, i0+ni), columns [j0, j0+nj). `buf` holds B x B elements, 16-byte
// aligned; its rows are the tile's source rows.
template <typename T, bool Stream>
void tile(const T* src, T* dst, const Transpose& tr, std::int64_t i0, std::int64_t ni,
          std::int64_t j0, std::int64_t nj, T* buf) {
  constexpr std::int64_t B = tileFor<T>();
  for (std::int64_t j = 0; j < nj; ++j)
    std::memcpy(buf + j * B, src + (j0 + j) * tr.ld + i0, static_cast<std::size_t>(ni) * sizeof(T));
  std::int64_t i = 0;
#if defined(__SSE2__)
  constexpr std::int64_t M = microFor(static_cast<const T*>(nullptr));
  const std::int64_t nj_m = nj / M * M;
  for (; i + M <= ni; i += M) {
    T* d = dst + (i0 + i) * tr.cols + j0;
    for (std::int64_t j = 0; j < nj_m; j += M)
      micro<Stream>(buf + j * B + i, B, d + j, tr.cols);
    for (std::int64_t r = 0; r < M; ++r)
      for (std::int64_t j = nj_m; j < nj; ++j)
        d[r * tr.cols + j] = buf[j * B + i + r];
  }
#endif
  for (; i < ni; ++i) {
    T* d = dst + (i0 + i) * tr.cols + j0;
    for (std::int64_t j = 0; j < nj; ++j)
      d[j] = buf[j * B + i];
  }
}

// Units of work: B output rows of one batch entry. Split over libtorch's intra-op threads when
// `parallel` (a sync conversion, whose caller waits anyway); one thread otherwise (the async
// worker, which must not take the cores the model computes on).
template <typename T, bool Stream>
void run(const T* in, T* out, const Transpose& tr, bool parallel) {
  constexpr std::int64_t B = tileFor<T>();
  const std::int64_t row_blocks = (tr.rows + B - 1) / B;
  auto units = [&](std::int64_t begin, std::int64_t end) {
    alignas(64) T buf[B * B];
    for (std::int64_t u = begin; u < end; ++u) {
      const std::int64_t b = u / row_blocks, i0 = u % row_blocks * B;
      const T* src = in + tr.batchOffset(b);
      T* dst = out + b * tr.rows * tr.cols;
      for (std::int64_t j0 = 0; j0 < tr.cols; j0 += B)
        tile<T, Stream>(src, dst, tr, i0, std::min(B, tr.rows - i0), j0, std::min(B, tr.cols - j0),
                        buf);
    }
#if defined(__SSE2__)
    if constexpr (Stream)
      _mm_sfence(); // this thread's streamed lines are visible before the output is handed over
#endif
  };
  const std::int64_t n = tr.batch() * row_blocks;
  if (!parallel) {
    units(0, n);
    return;
  }
  // At least 256 KiB of output per task: below that, waking threads costs more than it saves.
  const std::int64_t unit_bytes = B * tr.cols * static_cast<std::int64_t>(sizeof(T));
  at::parallel_for(0, n, std::max<std::int64_t>(1, (std::int64_t{256} << 10) / unit_bytes), units);
}

template <typename T> void dispatch(const T* in, T* out, const Transpose& tr, bool parallel) {
  const auto bytes = static_cast<std::int64_t>(sizeof(T)) * tr.batch() * tr.rows * tr.cols;
#if defined(__SSE2__)
  // Streaming stores need every 16-byte store aligned: a 16-byte aligned output whose rows are
  // whole multiples of 16 bytes (the micro-kernel starts each row segment at a multiple of M).
  const bool aligned = reinterpret_cast<std::uintptr_t>(out) % 16 == 0 &&
                       (tr.cols * static_cast<std::int64_t>(sizeof(T))) % 16 == 0;
  if (bytes >= kStreamBytes && aligned) {
    run<T, true>(in, out, tr, parallel);
    return;
  }
#endif
  (void)bytes;
  run<T, false>(in, out, tr, parallel);
}

} // namespace

std::optional<Transpose> asBatchedTranspose(const std::int64_t* sizes, const std::int64_t* strides,
                                            std::int64_t ndim) {
  std::vector<std::pair<std::int64_t, std::int64_t>> m; // (size, stride), output order
  for (std::int64_t d = 0; d < ndim; ++d) {
    const std::int64_t s = sizes[d], st = strides[d];
    if (s == 1)
      continue;
    if (!m.empty() && m.back().second == st * s)
      m.back() = {m.back().first * s, st};
    else
      m.emplace_back(s, st);
  }
  if (m.size() < 2 || m.size() > 2 + Transpose::kMaxBatchDims)
    return std::nullopt;
  Transpose tr;
  const std::size_t k = m.size() - 2;
  tr.rows = m[k].first;
  tr.cols = m[k + 1].first;
  tr.ld = m[k + 1].second;
  if (m[k].second != 1 || tr.ld < tr.rows)
    return std::nullopt;
  tr.batch_dims = static_cast<int>(k);
  for (std::size_t d = 0; d < k; ++d) {
    tr.batch_sizes[d] = m[d].first;
    tr.batch_strides[d] = m[d].second;
  }
  return tr;
}

void transpose(const void* in, void* out, std::size_t item, const Transpose& tr, bool parallel) {
  if (item == 2)
    dispatch(static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(out), tr, parallel);
  else if (item == 4)
    dispatch(static_cast<const std::uint32_t*>(in), static_cast<std::uint32_t*>(out), tr, parallel);
  else
    dispatch(static_cast<const std::uint64_t*>(in), static_cast<std::uint64_t*>(out), tr, parallel);
}

} // namespace xalloc::runtime
