// program-wide-edit: in a C++ program an edit converts the expression's value for every use of
// it, not only for the consumers that gain, so each one must be known to keep its output bits
// and layout with a contiguous input.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> programWideEdit(const SyncSite& s) {
  const std::size_t unknown = s.unmeasured + s.differing + s.relayouting;
  if (!s.program || s.candidates.empty() || unknown == 0)
    return std::nullopt;
  return Verdict{formats::Action::None,
                 "the edit would convert the value for every use of it, and " +
                     std::to_string(unknown) + " of " + std::to_string(s.consumers()) +
                     " consumer(s) " +
                     (s.differing     ? "give other output bits"
                      : s.relayouting ? "change output layout"
                                      : "could not be measured") +
                     " with a contiguous input",
                 true, Carries::Candidates, /*async=*/false};
}

} // namespace xalloc::scheduler::rules
