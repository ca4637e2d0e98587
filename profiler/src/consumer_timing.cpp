// compareLayouts / setTimings / disturbed: one consumer's paired timings and output check.
#include "xalloc/profiler/consumer_timing.h"

#include <cmath>
#include <utility>

#include "xalloc/profiler/conversion_cost.h"
#include "xalloc/tspass/value_compare.h"

namespace xalloc::profiler {

bool compareLayouts(const std::function<std::vector<c10::IValue>(bool other)>& run,
                    bool to_contiguous, formats::ConsumerTiming& c,
                    std::vector<c10::IValue>* other_outputs) {
  std::vector<c10::IValue> out_a, out_b;
  try {
    out_a = run(false);
  } catch (const std::exception&) {
    c.note = "failed when re-run in isolation";
    return false;
  }
  try {
    out_b = run(true);
  } catch (const std::exception&) {
    if (to_contiguous) {
      c.note = "failed with a contiguous input";
    } else {
      c.accepts_noncontiguous = false;
      c.note = "refuses a non-contiguous input";
    }
    return false;
  }
  c.identical_output = tspass::bitwiseEqual(out_a, out_b);
  if (!c.identical_output) {
    const double e = tspass::maxRelativeError(out_a, out_b);
    if (std::isfinite(e))
      c.output_error = e; // else unbounded: fits no tolerance
  }
  c.same_output_layout = tspass::sameLayout(out_a, out_b);
  if (!c.same_output_layout && other_outputs)
    *other_outputs = std::move(out_b);
  return true;
}

void setTimings(const PairedTiming& m, bool to_contiguous, formats::ConsumerTiming& c) {
  c.delta_ms = m.delta.median_ms;
  c.delta_spread_ms = m.delta.iqr_ms;
  c.measured = true;
  c.noisy = isNoisy(m.a) || isNoisy(m.b);
  c.time_as_is_ms = m.a.median_ms;
  c.time_as_is_spread_ms = m.a.iqr_ms;
  if (to_contiguous) {
    c.time_contiguous_ms = m.b.median_ms;
    c.time_contiguous_spread_ms = m.b.iqr_ms;
  } else {
    c.time_noncontiguous_ms = m.b.median_ms;
    c.time_noncontiguous_spread_ms = m.b.iqr_ms;
  }
}

bool disturbed(const formats::ConsumerTiming& c) {
  return c.measured && c.time_as_is_ms >= 0.05 &&
         c.delta_spread_ms.value_or(0) > 0.08 * c.time_as_is_ms;
}

} // namespace xalloc::profiler
