// Grouped 2-D convolutions of channels-last floats whose groups have a multiple of eight output
// channels (RegNet's 3x3s, group widths 8 to 64), and first convolutions of three or four input
// channels, bias added and the activation applied (grouped_nhwc.cpp): what the packed
// convolutions run for them.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

#include "dispatch.h"

namespace xalloc::runtime {

/// Whether the kernel takes a convolution of `groups` groups of `in_per_group` input and
/// `out_per_group` output channels: 8 | out_per_group, and more than one group or at most four
/// inputs (a first convolution of RGB pixels).
bool groupedNhwcTakes(std::int64_t groups, std::int64_t in_per_group, std::int64_t out_per_group);

/// A dense [out, in / groups, kh, kw] weight in the kernel's layout: for each group, each block
/// of eight of its output channels, each tap and each of its input channels, eight floats.
at::Tensor groupedNhwcWeight(const at::Tensor& weight, std::int64_t groups);

/// p.out = p.act(conv(p.in) + p.bias) over `batch` images, its rows shared among at most
/// `threads` of the caller's intra-op threads (the best variant this CPU runs).
void groupedNhwc(const Grouped2d& p, std::int64_t batch, int threads);

} // namespace xalloc::runtime
