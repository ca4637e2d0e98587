// Channels-last for 5-D regions (NDHWC): as channels_last.cpp, in ChannelsLast3d.
#include "edit.h"
#include "xalloc/tspass/region_layouts.h"

namespace xalloc::tspass {

namespace {
class ChannelsLast3d final : public RegionLayout {
public:
  ChannelsLast3d() : RegionLayout("channels_last_3d") {}
  RegionEdit apply(torch::jit::Graph& g, LayoutRegion& r) const override {
    return layouts::applyChannelsLast(g, r, c10::MemoryFormat::ChannelsLast3d, nullptr);
  }
  bool readsEntriesIn(const LayoutRegion& r) const override {
    return layouts::entriesConvertedTo(r, c10::MemoryFormat::ChannelsLast3d);
  }
  bool appliedAt(const torch::jit::Node* now, const std::string& was) const override {
    return layouts::weightLaidOutIn(now, was, c10::MemoryFormat::ChannelsLast3d);
  }
};
} // namespace

const RegionLayout& channels_last_3dLayout() {
  static const ChannelsLast3d layout;
  return layout;
}

} // namespace xalloc::tspass
