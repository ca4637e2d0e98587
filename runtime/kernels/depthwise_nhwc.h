// Depthwise 2-D convolutions of channels-last floats, one filter per channel, bias added
// (depthwise_nhwc.cpp): what the packed convolutions run for them.
#pragma once

#include <cstdint>

#include "dispatch.h"

namespace xalloc::runtime {

/// p.out = p.act(conv(p.in) + p.bias) over `batch` images, its rows shared among at most `threads`
/// of the caller's intra-op threads (the best variant this CPU runs; the baseline everywhere).
void depthwiseNhwc(const Depthwise2d& p, std::int64_t batch, int threads);

} // namespace xalloc::runtime
