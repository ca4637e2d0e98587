// Channels-last with packed convolutions (packed_convs.h): 4-D regions, NHWC, each aten::conv2d
// xalloc::conv2d_packed. The class is shared with channels_last_3d_packed.cpp.
#include "packed_convs.h"

namespace xalloc::tspass {

namespace layouts {
RegionEdit ChannelsLastPacked::apply(torch::jit::Graph& g, LayoutRegion& r) const {
  return applyChannelsLast(g, r, mf_, [&](RegionEdit& e) {
    const auto adds = splitConvsOfCats(g, r);
    fuseResidualAdds(g, r, e, &adds); // the adds of the split alone: no residual of the model's
    packConvs(g, r, e);
    poolWithoutIndices(g, r, e);
  });
}

bool ChannelsLastPacked::appliedAt(const torch::jit::Node* now, const std::string&) const {
  return isPackedConv(now);
}
} // namespace layouts

const RegionLayout& channels_last_packedLayout() {
  static const layouts::ChannelsLastPacked layout("channels_last+packed",
                                                  c10::MemoryFormat::ChannelsLast);
  return layout;
}

} // namespace xalloc::tspass
