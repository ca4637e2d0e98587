// program-wide-edit: in a C++ program an edit converts the expression's value for every use of
// it, not only for the consumers that gain, so each one must be known to keep its output bits
// and layout with a contiguous input.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> programWideEdit(const SyncSite& s) {
  const std::size_t unknown = s.unmeasured + s.differing + s.relayouting;
  if (!s.program || s.candidates.empty() || unknown == 0)
    return std::nullopt;
  const formats::Blocker why = s.differing     ? formats::Blocker::OutputBits
                               : s.relayouting ? formats::Blocker::OutputLayout
                                               : formats::Blocker::Unmeasured;
  formats::NamedValues v = weighed(s);
  v.push_back({"unknown", static_cast<double>(unknown)});
  v.push_back({"all_consumers", static_cast<double>(s.consumers())});
  return Verdict{formats::Action::None, why, std::move(v), true, Carries::Candidates,
                 /*async=*/false};
}

} // namespace xalloc::scheduler::rules
