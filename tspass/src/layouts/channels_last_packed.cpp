// Channels-last with packed convolutions: as channels_last.cpp, and each convolution with
// constant parameters becomes the runtime's xalloc::conv2d_packed (weights packed once for
// oneDNN), the activation that is its only reader fused into it; max poolings are the
// runtime's, without indices.
#include "edit.h"
#include "xalloc/tspass/region_layouts.h"

namespace xalloc::tspass {

namespace {
class ChannelsLastPacked final : public RegionLayout {
public:
  ChannelsLastPacked() : RegionLayout("channels_last+packed") {}
  RegionEdit apply(torch::jit::Graph& g, LayoutRegion& r) const override {
    return layouts::applyChannelsLast(g, r, c10::MemoryFormat::ChannelsLast, [&](RegionEdit& e) {
      layouts::packConvs(g, r, e);
      layouts::poolWithoutIndices(g, r, e);
    });
  }
  bool appliedAt(const torch::jit::Node* now, const std::string&) const override {
    return now->kind() == layouts::sym("xalloc::conv2d_packed");
  }
};
} // namespace

const RegionLayout& channels_last_packedLayout() {
  static const ChannelsLastPacked layout;
  return layout;
}

} // namespace xalloc::tspass
