// other-memory-format: `.contiguous(memory_format=torch.channels_last)` and the like are a real
// change of layout, which no rewriter removes (only plain `.contiguous()` calls).
#include "rule.h"

namespace xalloc::scheduler::rules {

std::optional<Verdict> otherMemoryFormat(const RemoveSite& s) {
  if (s.record.contiguous)
    return std::nullopt;
  return blocked(formats::Blocker::OtherFormat);
}

} // namespace xalloc::scheduler::rules
