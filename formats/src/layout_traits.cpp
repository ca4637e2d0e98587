// The region layouts' rows: one per layout (see layout_traits.h).
#include "xalloc/formats/layout_traits.h"

#include <algorithm>

namespace xalloc::formats {

bool LayoutTraits::fits(int rank) const {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

const std::vector<LayoutTraits>& regionLayoutTraits() {
  // name, target, packed, ranks, needs the runtime, needs oneDNN
  static const std::vector<LayoutTraits> rows = {
      {"contiguous", LayoutTarget::Contiguous, false, {0, 4, 5}, false, false},
      {"contiguous+packed", LayoutTarget::Contiguous, true, {0}, true, true},
      {"channels_last", LayoutTarget::ChannelsLast, false, {4}, false, false},
      {"channels_last+packed", LayoutTarget::ChannelsLast, true, {4}, true, true},
      {"channels_last+packed+add", LayoutTarget::ChannelsLast, true, {4}, true, true},
      {"channels_last_3d", LayoutTarget::ChannelsLast3d, false, {5}, false, false},
      {"channels_last_3d+packed", LayoutTarget::ChannelsLast3d, true, {5}, true, true},
      {"channels_last_3d+packed+add", LayoutTarget::ChannelsLast3d, true, {5}, true, true},
      {"blocked", LayoutTarget::Blocked, false, {4, 5}, true, false},
  };
  return rows;
}

const LayoutTraits* layoutTraits(LayoutTarget target, bool packed) {
  for (const auto& t : regionLayoutTraits())
    if (t.target == target && t.packed == packed)
      return &t;
  return nullptr;
}

const LayoutTraits* layoutTraits(std::string_view name) {
  for (const auto& t : regionLayoutTraits())
    if (name == t.name)
      return &t;
  return nullptr;
}

std::string regionLayoutNames() {
  std::string out;
  for (const auto& t : regionLayoutTraits())
    out += (out.empty() ? "'" : ", '") + std::string(t.name) + "'";
  return out;
}

} // namespace xalloc::formats
