// The channels-last layouts with packed convolutions, 2-D and 3-D alike: the classes
// channels_last_packed.cpp, channels_last_packed_add.cpp and their _3d twins make their one
// object of, by name and memory format (ChannelsLast for 4-D regions, ChannelsLast3d for 5-D).
#pragma once

#include <unordered_set>

#include "edit.h"
#include "xalloc/tspass/region_layouts.h"

namespace xalloc::tspass::layouts {

/// Channels-last (`mf`) with packed convolutions: as channels_last.cpp, and each convolution
/// with constant parameters becomes the runtime's xalloc::conv2d_packed or conv3d_packed
/// (weights packed once for oneDNN), the activation that is its only reader fused into it; max
/// poolings are the runtime's, without indices.
class ChannelsLastPacked final : public RegionLayout {
public:
  ChannelsLastPacked(const char* name, c10::MemoryFormat mf) : RegionLayout(name), mf_(mf) {}
  RegionEdit apply(torch::jit::Graph& g, LayoutRegion& r) const override;
  bool appliedAt(const torch::jit::Node* now, const std::string&) const override;

private:
  c10::MemoryFormat mf_;
};

/// As ChannelsLastPacked, and a convolution whose only reader is a residual add, with the
/// activation after the add, becomes one xalloc::conv2d_packed_add (conv3d_packed_add)
/// (channels_last_packed_add.cpp).
class ChannelsLastPackedAdd final : public RegionLayout {
public:
  ChannelsLastPackedAdd(const char* name, c10::MemoryFormat mf) : RegionLayout(name), mf_(mf) {}
  RegionEdit apply(torch::jit::Graph& g, LayoutRegion& r) const override;
  bool appliedAt(const torch::jit::Node* now, const std::string&) const override;

private:
  c10::MemoryFormat mf_;
};

/// Each convolution of the region that reads a concatenation along the channels (2 to 4 pieces of
/// known width, read by it alone, maybe through one per-channel op such as a pooling) becomes one
/// convolution per piece, each with its slice of the weight, summed by aten::add: the adds it
/// made, for fuseResidualAdds (split_cats.cpp). Before packConvs.
std::unordered_set<const Node*> splitConvsOfCats(torch::jit::Graph& g, LayoutRegion& r);

/// Each convolution whose only reader is a residual add (of those in `only`, when given), with
/// the activation after the add, becomes one xalloc::conv2d_packed_add (conv3d_packed_add)
/// (channels_last_packed_add.cpp). Before packConvs.
void fuseResidualAdds(torch::jit::Graph& g, LayoutRegion& r, RegionEdit& e,
                      const std::unordered_set<const Node*>* only);

} // namespace xalloc::tspass::layouts
