// unrecorded-input: a conversion whose input the profile did not record cannot be judged.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> unrecordedInput(const RemoveSite& s) {
  if (s.input)
    return std::nullopt;
  return blocked(formats::Blocker::NotRecorded);
}

} // namespace xalloc::scheduler::rules
