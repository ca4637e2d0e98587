// already-converted: the value's readers are an existing aten::contiguous (a site of its own:
// keep it or remove it) and size readers.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> alreadyConverted(const SyncSite& s) {
  if (s.worth() || s.converted == 0 || s.converted + s.neutral != s.consumers())
    return std::nullopt;
  return notWorth(s, formats::Blocker::NothingToGain);
}

} // namespace xalloc::scheduler::rules
