// output-bits: a layout change that moves a consumer's outputs beyond the tolerance (any change
// of bits under --exact) is never made. xrewrite checks the whole model's outputs again.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> outputBits(const SyncSite& s) {
  if (s.worth() || s.differing == 0 || !s.candidates.empty())
    return std::nullopt;
  return notWorth(s, formats::Blocker::OutputBits, {{"exact", s.exact ? 1.0 : 0.0}});
}

std::optional<Verdict> outputBitsRemove(const RemoveSite& s) {
  if (s.blocker != formats::Blocker::OutputBits)
    return std::nullopt;
  return blocked(s.blocker, {{"op", s.blocker_op}, {"exact", s.exact ? 1.0 : 0.0}});
}

} // namespace xalloc::scheduler::rules
