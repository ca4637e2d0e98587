// unmeasured: what no measurement supports is not decided on.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> unmeasured(const SyncSite& s) {
  if (s.worth() || s.unmeasured != s.consumers())
    return std::nullopt;
  return notWorth(s, formats::Blocker::Unmeasured);
}

std::optional<Verdict> unmeasuredRemove(const RemoveSite& s) {
  if (s.blocker != formats::Blocker::Unmeasured)
    return std::nullopt;
  return blocked(s.blocker, {{"op", s.blocker_op}});
}

} // namespace xalloc::scheduler::rules
