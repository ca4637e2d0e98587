// convert: the measured saving beats the predicted cost by more than the margin: make the
// value contiguous before its consumers (sync; the solver may hide it in an idle window).
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> convert(const SyncSite& s) {
  if (!s.worth())
    return std::nullopt;
  return Verdict{formats::Action::Sync,
                 "saves " + fmtMs(s.saving) + " in " + std::to_string(s.gaining.size()) +
                     " consumer(s) for a " + s.cost_model + " cost of " + fmtMs(s.cost) +
                     withAllocation(s.allocation) + s.made_and_read +
                     (s.through.empty() ? std::string()
                                        : "; measured through what runs after " +
                                              std::to_string(s.through.size()) +
                                              " consumer(s) whose output changes layout with it"),
                 false, Carries::Gaining};
}

} // namespace xalloc::scheduler::rules
