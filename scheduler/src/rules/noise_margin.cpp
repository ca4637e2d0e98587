// noise-margin: a gain must beat the noise of the measurements it rests on, an absolute floor,
// and a fraction of the time it trades; smaller gains do not repeat from run to run.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> noiseMargin(const SyncSite& s) {
  if (s.worth())
    return std::nullopt;
  return notWorth(s, formats::Blocker::BelowMargin);
}

std::optional<Verdict> noiseMarginRemove(const RemoveSite& s) {
  const double call = s.conversion.duration_ms;
  if (call - s.extra > s.margin)
    return std::nullopt;
  return Verdict{formats::Action::None,
                 formats::Blocker::BelowMargin,
                 {{"call_ms", call},
                  {"extra_ms", s.extra},
                  {"margin_ms", s.margin},
                  {"margin", s.margin_is_floor ? "floor" : "noise"}},
                 false,
                 Carries::Measured};
}

} // namespace xalloc::scheduler::rules
