// views: view ops compute new sizes and strides and read no data; a contiguous input cannot
// make them faster.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> views(const SyncSite& s) {
  // A view followed to what reads its output (SyncSite::through) was weighed by that.
  if (s.worth() || s.candidates.empty() || !s.through.empty() || !s.ops.allViews(s.candidates))
    return std::nullopt;
  return notWorth(s, formats::Blocker::NothingToGain);
}

} // namespace xalloc::scheduler::rules
