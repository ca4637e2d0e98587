// judgeBesideNoise: a rewrite's change of outputs against what float32 rounding of the inputs
// or at each layer, or freezing alone, already does to the original's.
#include "noise_verdict.h"

#include <cmath>
#include <cstdio>

#include "xalloc/formats/schedule.h"
#include "xalloc/tspass/value_compare.h"

namespace xalloc::rewriter {

std::string sci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", x);
  return buf;
}

NoiseVerdict judgeBesideNoise(const c10::IValue& out_a, const c10::IValue& out_b, double error,
                              double tolerance, const std::vector<NoiseReference>& references,
                              const std::optional<c10::IValue>& frozen_alone) {
  NoiseVerdict v;
  v.counted = error;
  v.bound = tolerance;
  if (frozen_alone && tspass::bitwiseEqual(*frozen_alone, out_b)) {
    // Nothing changed but what freezing changes.
    v.within = true;
    v.unordered = !std::isfinite(error);
    v.counted = v.unordered ? tspass::maxSortedError(out_a, out_b) : error;
    v.bound = std::max(tolerance, v.counted);
    v.why = "what freezing alone (torch.jit.freeze) changes: the rewritten model's outputs are "
            "the frozen original's, bit for bit";
    return v;
  }
  std::vector<std::pair<const c10::IValue*, const char*>> refs; // each with what it is
  for (const NoiseReference& r : references)
    refs.emplace_back(&r.outputs, r.what);
  if (frozen_alone)
    refs.emplace_back(&*frozen_alone, "freezing alone (torch.jit.freeze)");
  // The largest finite reference, and whether one reorders the outputs.
  double reference = 0;
  bool reorders = false;
  std::string named = kInputUlp;
  for (const auto& [ref, what] : refs) {
    const double r =
        tspass::bitwiseEqual(out_a, *ref) ? 0.0 : tspass::maxRelativeError(out_a, *ref);
    if (std::isfinite(r) && r > reference) {
      reference = r;
      named = what;
    }
    reorders = reorders || !std::isfinite(r);
  }
  if (std::isfinite(error)) {
    v.bound = formats::noiseBound(tolerance, reference);
    v.within = error <= v.bound;
    if (v.within)
      v.why = "twice what " + named + " moves the original's outputs (" + sci(reference) +
              "): float32's own noise";
    return v;
  }
  if (!reorders)
    return v;
  // The original's own outputs reorder under one ulp of its inputs or freezing alone (top-k
  // and NMS put nearly equal scores in either order): compared as multisets.
  double sorted_reference = 0;
  for (const auto& [ref, what] : refs) {
    const double s = tspass::maxSortedError(out_a, *ref);
    if (std::isfinite(s))
      sorted_reference = std::max(sorted_reference, s);
  }
  const double sorted = tspass::maxSortedError(out_a, out_b);
  v.bound = formats::noiseBound(tolerance, sorted_reference);
  if (std::isfinite(sorted) && sorted <= v.bound) {
    v.within = true;
    v.counted = sorted;
    v.unordered = true;
    v.why = "twice what float32 rounding (of the inputs, at each layer, in PyTorch's own "
            "channels-last) or freezing alone moves the original's (" +
            sci(sorted_reference) +
            "), which reorder its outputs as this does (top-k and NMS put nearly equal scores in "
            "either order)";
  }
  return v;
}

} // namespace xalloc::rewriter
