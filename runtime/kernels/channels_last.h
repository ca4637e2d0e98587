// A float NCHW tensor made channels-last with the runtime's kernels: what a packed convolution
// does with an input that is not channels-last (the fast form lets it convert the model's
// NCHW input itself, instead of an aten::contiguous before it).
//
// ATen's copy to channels-last is slow where the input is cold (a model's input, read once per
// call): 1x3x224x224 takes ~80 us on this machine's AVX-512 EPYC, against 11 us for the three
// planes interleaved with AVX-512 permutes, and a batch of 8 ~500 us. Inputs of 16 channels or
// more go to the runtime's cache-blocked transpose (transpose.h), as fast as ATen's or faster.
#pragma once

#include <ATen/ATen.h>

namespace xalloc::runtime {

/// x.contiguous(at::MemoryFormat::ChannelsLast) for a 4-D x, ChannelsLast3d for a 5-D one (NCDHW
/// to NDHWC), the same values and the same rules: x itself when it is channels-last already,
/// ATen's own conversion for anything but a dense float NCHW or NCDHW CPU tensor that wants no
/// gradient.
at::Tensor toChannelsLast(const at::Tensor& x);

} // namespace xalloc::runtime
