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
    return blocked(formats::Blocker::NeedsContiguous, {{"op", s.needs_contiguous_anyway}});
  return Verdict{formats::Action::Remove,
                 formats::Blocker::None,
                 {{"call_ms", s.conversion.duration_ms}},
                 false,
                 Carries::Call};
}

} // namespace xalloc::scheduler::rules
