// The raw buffer of an MKLDNN tensor (oneDNN's blocked layouts, padded lanes included), for the
// blocked regions' ops that must see every element: libtorch's own MKLDNN relu and max pooling
// drop NaN (oneDNN's max), where ATen keeps it.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace xalloc::runtime::detail {

struct MkldnnBuffer {
  float* data = nullptr;
  std::int64_t elements = 0; ///< physical: padded lanes (zero) included
  /// Padded channel lanes of a 4-D or 5-D channel-blocked layout: how many per pixel (n, h, w)
  /// or voxel (n, d, h, w), and where (offset into data, sizes and strides over every dimension
  /// but the channels); pad_offset -1 when the layout is padded in a way not found here.
  std::int64_t pad_lanes = 0;
  std::int64_t pad_offset = 0;
  std::vector<std::int64_t> pad_sizes, pad_strides;
};

/// The buffer of a float32 MKLDNN tensor; an error naming `op` when it cannot be read as one
/// (a libtorch whose MKLDNN tensors are laid out otherwise).
MkldnnBuffer mkldnnBuffer(const at::Tensor& t, const char* op);

} // namespace xalloc::runtime::detail
