// needs-contiguous: a consumer that refuses a non-contiguous input (aten::view) keeps the
// conversion in front of it.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> needsContiguous(const RemoveSite& s) {
  if (s.blocker != Blocker::NeedsContiguous)
    return std::nullopt;
  return blocked(s.blocker_op + " needs a contiguous input");
}

} // namespace xalloc::scheduler::rules
