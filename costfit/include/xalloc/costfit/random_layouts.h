// Seeded random layouts for tests and benchmarks of the cost models: a random permutation of a
// random contiguous shape, in one of the given dtypes.
#pragma once

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "xalloc/formats/types.h"

namespace xalloc::costfit {

inline formats::Layout randomPermutedLayout(std::mt19937_64& rng,
                                            const std::vector<std::string>& dtypes, int max_rank,
                                            std::int64_t max_size) {
  const int rank = 2 + static_cast<int>(rng() % static_cast<unsigned>(std::max(max_rank - 1, 1)));
  std::vector<std::int64_t> shape;
  for (int d = 0; d < rank; ++d)
    shape.push_back(2 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(max_size)));
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= shape[d];
  }
  std::vector<std::size_t> perm(shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  formats::Layout l;
  l.dtype = dtypes[rng() % dtypes.size()];
  for (std::size_t p : perm) {
    l.sizes.push_back(shape[p]);
    l.strides.push_back(strides[p]);
  }
  return l;
}

} // namespace xalloc::costfit
