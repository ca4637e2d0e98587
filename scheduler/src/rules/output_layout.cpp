// output-layout: a consumer whose output changes layout with the value's changes what runs
// after it, which its own re-run does not measure.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> outputLayout(const SyncSite& s) {
  if (s.worth() || s.relayouting == 0 || !s.candidates.empty())
    return std::nullopt;
  return notWorth(s, "a contiguous input changes the layout of the consumer's output, and so "
                     "what runs after it (not measured)");
}

std::optional<Verdict> outputLayoutRemove(const RemoveSite& s) {
  if (s.blocker != Blocker::OtherLayout)
    return std::nullopt;
  return blocked(s.blocker_op + "'s output changes layout without the conversion");
}

} // namespace xalloc::scheduler::rules
