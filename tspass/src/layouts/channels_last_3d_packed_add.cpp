// Channels-last with packed convolutions and residual adds fused, for 5-D regions (NDHWC): a
// video ResNet's blocks end in xalloc::conv3d_packed_add (packed_convs.h,
// channels_last_packed_add.cpp).
#include "packed_convs.h"

namespace xalloc::tspass {

const RegionLayout& channels_last_3d_packed_addLayout() {
  static const layouts::ChannelsLastPackedAdd layout("channels_last_3d+packed+add",
                                                     c10::MemoryFormat::ChannelsLast3d);
  return layout;
}

} // namespace xalloc::tspass
