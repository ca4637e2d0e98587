// no-gain: no consumer runs faster with a contiguous input.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> noGain(const SyncSite& s) {
  if (s.worth() || s.saving > 0)
    return std::nullopt;
  return notWorth(s, formats::Blocker::NothingToGain);
}

} // namespace xalloc::scheduler::rules
