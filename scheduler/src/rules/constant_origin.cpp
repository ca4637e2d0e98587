// constant-origin: a value computed from constants alone (a frozen weight's transpose) and read
// only by consumers that gain is converted once, into the model, by xrewrite: it costs nothing
// per run (decide.cpp prices it at zero).
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> constantOrigin(const SyncSite& s) {
  if (!s.constant || !s.worth())
    return std::nullopt;
  return Verdict{formats::Action::Sync, formats::Blocker::None, weighed(s), false,
                 Carries::Gaining};
}

} // namespace xalloc::scheduler::rules
