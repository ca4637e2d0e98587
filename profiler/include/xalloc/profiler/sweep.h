// The synthetic conversion sweep (`xprof --sweep`): non-contiguous layouts beyond the ones a
// model happens to produce — permutations of every rank from 2 to 5, strided slices and
// broadcasts, in several dtypes, from 4 KiB up to a size limit — so the cost model is fitted on
// more than one model's shapes. Seeded, so two sweeps with one seed measure the same layouts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace xalloc::profiler {

struct SweepLayout {
  std::vector<std::int64_t> base_shape; // the contiguous tensor the view is taken of
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::string kind;               // "permute", "slice" (every other element) or "expand"
  std::vector<std::int64_t> perm; // permute: the dimension order
  std::int64_t dim = 0;           // slice / expand: the dimension
  std::int64_t expand_to = 0;     // expand: the new size of a size-1 dimension
  std::int64_t bytes = 0;         // bytes of the view (numel * element size)

  /// Allocates the base and returns the non-contiguous view.
  at::Tensor materialize() const;
};

/// `count` layouts whose views hold from 4 KiB to `max_bytes` bytes, log-uniformly.
std::vector<SweepLayout> sweepLayouts(std::uint64_t seed, int count, std::int64_t max_bytes);

/// The default size limit: 256 MiB, or a sixteenth of the available memory when that is less.
std::int64_t defaultSweepMaxBytes();

} // namespace xalloc::profiler
