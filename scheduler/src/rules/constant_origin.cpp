// constant-origin: a value computed from constants alone (a frozen weight's transpose) and read
// only by consumers that gain is converted once, into the model, by xrewrite: it costs nothing
// per run (decide.cpp prices it at zero).
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> constantOrigin(const SyncSite& s) {
  if (!s.constant || !s.worth())
    return std::nullopt;
  return Verdict{formats::Action::Sync,
                 "saves " + fmtMs(s.saving) + " in " + std::to_string(s.gaining.size()) +
                     " consumer(s); the value comes from constants, so it is converted once, "
                     "into the model, and costs nothing per run" +
                     s.made_and_read,
                 false, Carries::Gaining};
}

} // namespace xalloc::scheduler::rules
