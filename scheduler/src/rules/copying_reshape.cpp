// copying-reshape: an aten::reshape that gains from a contiguous input copies its input already
// (the layout has no view in the new shape): a conversion would only move that copy.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> copyingReshape(const SyncSite& s) {
  if (s.worth() || s.candidates.empty() || !s.ops.allViews(s.candidates) ||
      !s.ops.anyReshape(s.gaining))
    return std::nullopt;
  return notWorth(s, formats::Blocker::NothingToGain);
}

} // namespace xalloc::scheduler::rules
