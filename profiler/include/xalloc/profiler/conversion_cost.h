// What a `.contiguous()` costs: one layout's conversion measured (or read back from the timing
// database) the way every entry of a profile's conversion_cost_table is, and the helpers that
// measurement shares with the rest of xprof.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "xalloc/formats/profile.h"
#include "xalloc/profiler/measure.h"

namespace xalloc::profiler {

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
/// `source` is "model" or "sweep". `target`: the memory format the conversion makes (row-major,
/// or channels-last for a 4-D or 5-D tensor: `.contiguous(memory_format=...)`).
formats::ConversionCost
measureConversionCost(const at::Tensor& tensor, const std::string& source, int warmup, int repeats,
                      TimingStore* db,
                      formats::LayoutTarget target = formats::LayoutTarget::Contiguous);

/// The memory format of a target layout (Blocked has none: Contiguous).
c10::MemoryFormat memoryFormatOf(formats::LayoutTarget target);

/// Paired samples of one layout: its conversion, the plain copy timed right after, their ratio.
struct PairedSamples {
  std::vector<double> ms, ref_ms, ratio;
};

/// Appends `repeats` paired samples of converting `src` into `format` (after `warmup` untimed
/// pairs).
void measurePlacement(const at::Tensor& src, int warmup, int repeats, PairedSamples& into,
                      c10::MemoryFormat format = c10::MemoryFormat::Contiguous);

struct PassOptions {
  std::string source = "sweep";
  formats::LayoutTarget target = formats::LayoutTarget::Contiguous; // what each conversion makes
  int passes = 3;
  /// Warm-up and repetitions for a layout (all passes together); default 3 and 15.
  std::function<std::pair<int, int>(const at::Tensor&)> counts;
  /// Whether a layout is measured at all (false: left out of the result).
  std::function<bool(const formats::Layout&)> wanted;
  /// Called after each measurement with the count done so far, of count * passes.
  std::function<void(std::size_t)> tick;
};

/// Many layouts measured in `passes` passes over all of them, each pass on a freshly
/// materialized tensor (another placement) with its share of the repetitions. The machine's
/// slow moments last from milliseconds to seconds: measured back to back, one layout's samples
/// all fall in the same moment, and two sweeps of the same layouts differed by 8% between L2
/// and L3; spread over the sweep, a slow moment touches one pass of many layouts, and the
/// median over passes leaves it out. Only one layout is materialized at a time.
std::vector<formats::ConversionCost>
measureInPasses(std::size_t count, const std::function<at::Tensor(std::size_t)>& materialize,
                const PassOptions& o, TimingStore* db);

} // namespace xalloc::profiler
