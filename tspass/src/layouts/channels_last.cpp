// Channels-last (NHWC): a 4-D region's entries converted once, its convolution weights re-laid
// as constants, its exits made row-major again for their readers outside.
#include "edit.h"
#include "xalloc/tspass/region_layouts.h"

namespace xalloc::tspass {

namespace {
class ChannelsLast final : public RegionLayout {
public:
  ChannelsLast() : RegionLayout("channels_last") {}
  RegionEdit apply(torch::jit::Graph& g, LayoutRegion& r) const override {
    return layouts::applyChannelsLast(g, r, c10::MemoryFormat::ChannelsLast, nullptr);
  }
  bool readsEntriesIn(const LayoutRegion& r) const override {
    return layouts::entriesConvertedTo(r, c10::MemoryFormat::ChannelsLast);
  }
  bool appliedAt(const torch::jit::Node* now, const std::string& was) const override {
    return layouts::weightLaidOutIn(now, was, c10::MemoryFormat::ChannelsLast);
  }
};
} // namespace

const RegionLayout& channels_lastLayout() {
  static const ChannelsLast layout;
  return layout;
}

} // namespace xalloc::tspass
