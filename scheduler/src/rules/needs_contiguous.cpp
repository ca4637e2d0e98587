// needs-contiguous: a consumer that refuses a non-contiguous input (aten::view) keeps the
// conversion in front of it.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> needsContiguous(const RemoveSite& s) {
  if (s.blocker != formats::Blocker::NeedsContiguous)
    return std::nullopt;
  return blocked(s.blocker, {{"op", s.blocker_op}});
}

} // namespace xalloc::scheduler::rules
