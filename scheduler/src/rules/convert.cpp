// convert: the measured saving beats the predicted cost by more than the margin: make the
// value contiguous before its consumers (sync; the solver may hide it in an idle window).
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> convert(const SyncSite& s) {
  if (!s.worth())
    return std::nullopt;
  return Verdict{formats::Action::Sync, formats::Blocker::None, weighed(s), false,
                 Carries::Gaining};
}

} // namespace xalloc::scheduler::rules
