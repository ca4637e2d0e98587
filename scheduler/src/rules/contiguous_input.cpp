// contiguous-input: converting a tensor that is already contiguous returns that very tensor, so
// removing the call changes no result, aliasing or speed: it only saves the call. Unless a
// consumer needs a contiguous input: then the call guards the shapes not profiled (GPT-2's
// merge_heads is contiguous in a one-token decoding step, not in the prompt's).
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> contiguousInput(const RemoveSite& s) {
  if (!s.input->contiguous)
    return std::nullopt;
  if (!s.needs_contiguous_anyway.empty())
    return blocked(s.needs_contiguous_anyway +
                   " needs a contiguous input; the input is contiguous at these shapes, but may "
                   "not be at others");
  return Verdict{formats::Action::Remove,
                 "the input is already contiguous: the call is pure overhead (" +
                     fmtMs(s.conversion.duration_ms) + ")",
                 false, Carries::Call};
}

} // namespace xalloc::scheduler::rules
