// remove: the conversion costs more than it saves its consumers, by more than the margin.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> remove(const RemoveSite& s) {
  return Verdict{formats::Action::Remove,
                 "costs " + fmtMs(s.conversion.duration_ms) + " but saves its consumers only " +
                     fmtMs(s.extra),
                 false, Carries::Measured};
}

} // namespace xalloc::scheduler::rules
