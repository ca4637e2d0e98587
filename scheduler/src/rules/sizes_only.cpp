// sizes-only: consumers that read only sizes and flags (`B, C, H, W = x.shape`) see no layout.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> sizesOnly(const SyncSite& s) {
  if (s.worth() || s.neutral != s.consumers())
    return std::nullopt;
  return notWorth(s, formats::Blocker::NothingToGain);
}

} // namespace xalloc::scheduler::rules
