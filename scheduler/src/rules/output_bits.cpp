// output-bits: a layout change that changes a consumer's output bits is never made (a numeric
// tolerance, when there is one, is the rewriter's to check; today every edit keeps the bits).
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> outputBits(const SyncSite& s) {
  if (s.worth() || s.differing == 0 || !s.candidates.empty())
    return std::nullopt;
  return notWorth(s, "a contiguous input changes the consumer's output bits");
}

std::optional<Verdict> outputBitsRemove(const RemoveSite& s) {
  if (s.blocker != Blocker::OtherBits)
    return std::nullopt;
  return blocked(s.blocker_op + " gives different output bits without the conversion");
}

} // namespace xalloc::scheduler::rules
