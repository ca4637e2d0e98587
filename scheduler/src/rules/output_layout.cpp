// output-layout: a consumer whose output changes layout with the value's changes what runs
// after it, which its own re-run does not measure.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> outputLayout(const SyncSite& s) {
  if (s.worth() || s.relayouting == 0 || !s.candidates.empty())
    return std::nullopt;
  return notWorth(s, formats::Blocker::OutputLayout);
}

std::optional<Verdict> outputLayoutRemove(const RemoveSite& s) {
  if (s.blocker != formats::Blocker::OutputLayout)
    return std::nullopt;
  return blocked(s.blocker, {{"op", s.blocker_op}});
}

} // namespace xalloc::scheduler::rules
