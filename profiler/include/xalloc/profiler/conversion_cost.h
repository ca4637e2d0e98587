// What a `.contiguous()` costs: one layout's conversion measured (or read back from the timing
// database) the way every entry of a profile's conversion_cost_table is, and the helpers that
// measurement shares with the rest of xprof.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>

#include "xalloc/formats/profile.h"
#include "xalloc/profiler/measure.h"

namespace xalloc::profiler {

class TimingDb;

/// The layout of a tensor as the documents describe it.
formats::Layout layoutOf(const at::Tensor& t);

/// The same layout (sizes, strides, offset) over a fresh copy of the tensor's whole storage: the
/// same values at another address. Callers that want several placements keep every copy alive,
/// so that each one really gets memory of its own rather than the block the last one freed.
at::Tensor relocated(const at::Tensor& t);

/// A measurement is noisy when its spread exceeds a quarter of its median.
bool isNoisy(const TimingStats& s);

/// The part of a database key that names how often a measurement was repeated.
std::string repeatsTag(int warmup, int repeats);

/// The cost of converting `tensor` to a contiguous layout, from `db` (when given and it has it)
/// or measured and stored there: the copy into a contiguous buffer reused across repeats (what a
/// conversion costs once its output memory is warm; the runtime converts into a planned
/// workspace; first touches of fresh pages depend on the allocator's history, not on the
/// layout). Each sample is paired with a plain contiguous copy of the same bytes taken right
/// after it: machines drift (a shared CPU runs 40% slower for seconds at a time), and the ratio
/// of the two cancels that, where the absolute time cannot. Where the data sits moves the cost
/// too (cache sets, pages), so the samples are spread over three placements of the source.
/// `source` is "model" or "sweep".
formats::ConversionCost measureConversionCost(const at::Tensor& tensor, const std::string& source,
                                              int warmup, int repeats, TimingDb* db);

} // namespace xalloc::profiler
