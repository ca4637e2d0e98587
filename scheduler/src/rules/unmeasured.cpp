// unmeasured: what no measurement supports is not decided on.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> unmeasured(const SyncSite& s) {
  if (s.worth() || s.unmeasured != s.consumers())
    return std::nullopt;
  return notWorth(s, "no consumer could be measured in isolation");
}

std::optional<Verdict> unmeasuredRemove(const RemoveSite& s) {
  if (s.blocker != Blocker::Unmeasured)
    return std::nullopt;
  return blocked(s.blocker_op + " could not be measured without the conversion");
}

} // namespace xalloc::scheduler::rules
