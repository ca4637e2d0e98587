// empty-value: a value with no elements (an empty batch, a detector's image with no boxes left)
// has no data a layout can order: a conversion of it reads and writes nothing and can only add
// a call, whatever its consumers measured (their times on an empty tensor are noise).
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> emptyValue(const SyncSite& s) {
  if (s.record.layout.numel() != 0)
    return std::nullopt;
  return notWorth(s, formats::Blocker::NothingToGain, {{"sizes", s.record.layout.sizesText()}});
}

} // namespace xalloc::scheduler::rules
