// Channels-last with packed convolutions for 5-D regions (NDHWC): each aten::conv3d becomes
// xalloc::conv3d_packed, its activation fused (packed_convs.h, channels_last_packed.cpp).
#include "packed_convs.h"

namespace xalloc::tspass {

const RegionLayout& channels_last_3d_packedLayout() {
  static const layouts::ChannelsLastPacked layout("channels_last_3d+packed",
                                                  c10::MemoryFormat::ChannelsLast3d);
  return layout;
}

} // namespace xalloc::tspass
