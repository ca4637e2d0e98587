// sweepLayouts: seeded synthetic non-contiguous layouts for the cost model.
#include "xalloc/profiler/sweep.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <ATen/ATen.h>
#include <unistd.h>

namespace xalloc::profiler {

std::int64_t defaultSweepMaxBytes() {
  const long pages = ::sysconf(_SC_AVPHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::int64_t limit = std::int64_t{256} << 20;
  if (pages > 0 && page > 0)
    limit = std::min<std::int64_t>(limit, static_cast<std::int64_t>(pages) * page / 16);
  return std::max<std::int64_t>(limit, std::int64_t{1} << 20);
}

at::Tensor SweepLayout::materialize() const {
  at::Tensor base = at::empty(base_shape, at::TensorOptions().dtype(dtype));
  if (at::isFloatingType(dtype))
    base.uniform_(-1, 1);
  else
    base.fill_(1);
  if (kind == "permute")
    return base.permute(perm);
  if (kind == "slice")
    return base.slice(dim, 0, base.size(dim), 2);
  std::vector<std::int64_t> sizes = base_shape;
  sizes[static_cast<std::size_t>(dim)] = expand_to;
  return base.expand(sizes);
}

namespace {

// Splits `numel` into `rank` sizes >= 2 whose product is close to numel.
std::vector<std::int64_t> splitShape(std::int64_t numel, int rank, std::mt19937_64& rng) {
  std::vector<double> w(static_cast<std::size_t>(rank));
  std::uniform_real_distribution<double> u(0.3, 1.0);
  for (auto& x : w)
    x = u(rng);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  const double log_n = std::log(static_cast<double>(std::max<std::int64_t>(numel, 1)));
  std::vector<std::int64_t> shape;
  std::int64_t used = 1;
  for (int d = 0; d < rank; ++d) {
    std::int64_t s;
    if (d + 1 == rank) {
      s = std::max<std::int64_t>(2, (numel + used / 2) / used);
    } else {
      s = std::max<std::int64_t>(
          2, std::llround(std::exp(log_n * w[static_cast<std::size_t>(d)] / total)));
    }
    shape.push_back(s);
    used *= s;
  }
  return shape;
}

} // namespace

std::vector<SweepLayout> sweepLayouts(std::uint64_t seed, int count, std::int64_t max_bytes) {
  std::mt19937_64 rng(seed);
  const std::vector<c10::ScalarType> dtypes = {
      c10::ScalarType::Float, c10::ScalarType::Float,    c10::ScalarType::Float,
      c10::ScalarType::Half,  c10::ScalarType::BFloat16, c10::ScalarType::Double,
      c10::ScalarType::Long,  c10::ScalarType::Int,      c10::ScalarType::Byte};
  const double lo = std::log(4096.0);
  const double hi = std::log(static_cast<double>(std::max<std::int64_t>(max_bytes, 8192)));
  std::vector<SweepLayout> out;
  out.reserve(static_cast<std::size_t>(std::max(count, 0)));
  for (int i = 0; i < count; ++i) {
    SweepLayout l;
    l.dtype = dtypes[rng() % dtypes.size()];
    const std::int64_t item = static_cast<std::int64_t>(c10::elementSize(l.dtype));
    // Log-uniform sizes, with the ends of the range always present.
    const double f = count > 1 ? static_cast<double>(i) / (count - 1) : 0.0;
    const double jitter =
        std::uniform_real_distribution<double>(-0.5, 0.5)(rng) / std::max(count, 1);
    const double target = std::exp(lo + (hi - lo) * std::clamp(f + jitter, 0.0, 1.0));
    const std::int64_t numel = std::max<std::int64_t>(4, static_cast<std::int64_t>(target) / item);
    const int rank = 2 + static_cast<int>(rng() % 4);
    const unsigned pick = static_cast<unsigned>(rng() % 10);
    if (pick < 7) { // the common case: a permutation
      l.kind = "permute";
      l.base_shape = splitShape(numel, rank, rng);
      l.perm.resize(static_cast<std::size_t>(rank));
      std::iota(l.perm.begin(), l.perm.end(), 0);
      while (std::is_sorted(l.perm.begin(), l.perm.end()))
        std::shuffle(l.perm.begin(), l.perm.end(), rng);
    } else if (pick < 9) { // every other element along one dimension
      l.kind = "slice";
      l.base_shape = splitShape(numel * 2, rank, rng);
      l.dim = static_cast<std::int64_t>(rng() % static_cast<unsigned>(rank));
      if (l.base_shape[static_cast<std::size_t>(l.dim)] % 2)
        ++l.base_shape[static_cast<std::size_t>(l.dim)];
    } else { // a broadcast being materialized
      l.kind = "expand";
      l.base_shape = splitShape(numel, rank, rng);
      l.dim = static_cast<std::int64_t>(rng() % static_cast<unsigned>(rank));
      l.expand_to = l.base_shape[static_cast<std::size_t>(l.dim)];
      l.base_shape[static_cast<std::size_t>(l.dim)] = 1;
    }
    std::int64_t view_numel = 1;
    for (std::size_t d = 0; d < l.base_shape.size(); ++d) {
      std::int64_t s = l.base_shape[d];
      if (l.kind == "slice" && static_cast<std::int64_t>(d) == l.dim)
        s = (s + 1) / 2;
      if (l.kind == "expand" && static_cast<std::int64_t>(d) == l.dim)
        s = l.expand_to;
      view_numel *= s;
    }
    l.bytes = view_numel * item;
    out.push_back(std::move(l));
  }
  return out;
}

} // namespace xalloc::profiler
