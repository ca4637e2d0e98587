// noise-margin: a gain must beat the noise of the measurements it rests on, an absolute floor,
// and a fraction of the time it trades; smaller gains do not repeat from run to run.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> noiseMargin(const SyncSite& s) {
  if (s.worth())
    return std::nullopt;
  return notWorth(s, "saving " + fmtMs(s.saving) + " does not beat the " + s.cost_model + " cost " +
                         fmtMs(s.cost) + withAllocation(s.allocation) + " by " +
                         marginName(s.margin_is_floor) + " " + fmtMs(s.margin));
}

std::optional<Verdict> noiseMarginRemove(const RemoveSite& s) {
  const double call = s.conversion.duration_ms;
  if (call - s.extra > s.margin)
    return std::nullopt;
  return Verdict{formats::Action::None,
                 "the conversion (" + fmtMs(call) + ") saves its consumers " + fmtMs(s.extra) +
                     "; removing it gains less than " + marginName(s.margin_is_floor) + " " +
                     fmtMs(s.margin),
                 false, Carries::Measured};
}

} // namespace xalloc::scheduler::rules
