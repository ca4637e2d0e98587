// remove: the conversion costs more than it saves its consumers, by more than the margin.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> remove(const RemoveSite& s) {
  return Verdict{formats::Action::Remove,
                 formats::Blocker::None,
                 {{"call_ms", s.conversion.duration_ms}, {"extra_ms", s.extra}},
                 false,
                 Carries::Measured};
}

} // namespace xalloc::scheduler::rules
