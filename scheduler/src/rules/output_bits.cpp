// output-bits: a layout change that moves a consumer's outputs beyond the tolerance (any change
// of bits under --exact) is never made. xrewrite checks the whole model's outputs again.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> outputBits(const SyncSite& s) {
  if (s.worth() || s.differing == 0 || !s.candidates.empty())
    return std::nullopt;
  return notWorth(s, s.exact ? "a contiguous input changes the consumer's output bits (--exact)"
                             : "a contiguous input changes the consumer's output bits by more "
                               "than the tolerance");
}

std::optional<Verdict> outputBitsRemove(const RemoveSite& s) {
  if (s.blocker != Blocker::OtherBits)
    return std::nullopt;
  return blocked(s.blocker_op + (s.exact ? " gives different output bits without the conversion "
                                           "(--exact)"
                                         : " changes its output bits by more than the tolerance "
                                           "without the conversion"));
}

} // namespace xalloc::scheduler::rules
