// written-in-place: a value something writes in place is never copied or uncopied: the write
// would then reach the copy, or the original, and not what it reached before.
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> writtenInPlace(const SyncSite& s) {
  if (!s.record.has_writers)
    return std::nullopt;
  return blocked(formats::Blocker::Written);
}

std::optional<Verdict> writtenInPlaceRemove(const RemoveSite& s) {
  if (!s.record.has_writers && !s.input->has_writers)
    return std::nullopt;
  return blocked(formats::Blocker::Written);
}

} // namespace xalloc::scheduler::rules
