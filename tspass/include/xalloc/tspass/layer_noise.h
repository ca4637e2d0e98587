// Float32's own noise, layer by layer: what another summation order does to a model's outputs.
// One ulp of the inputs (inputs.h: oneUlpAway) measures how much the model amplifies a rounding
// at its entry; a rewrite that runs each convolution in another order (oneDNN's blocked or
// packed kernels, as the TorchScript peer's MKLDNN does) rounds at every layer instead, and a
// deep, ill-conditioned network (a detector's head behind 70 convolutions) amplifies those too.
// This reference rounds at every layer: each convolution's and matrix product's output moved by
// one unit in the last place, up or down at random.
#pragma once

namespace torch::jit {
struct Graph;
} // namespace torch::jit

namespace xalloc::tspass {

/// Inserts after each convolution and matrix product of `graph` (in any block: aten::conv1d,
/// conv2d, conv3d, linear, matmul, addmm, bmm) a move of its output's elements by one ulp, up or
/// down as a hash of the layer's number and the element's place in memory decides (the same
/// every run: `xalloc_noise::one_ulp_away_`, one in-place pass, registered with this pass),
/// zeros and subnormals kept as oneUlpAway keeps them, infinities and NaN too. Returns how many
/// outputs it moves. Run the graph on the same inputs as the original: its outputs are the
/// original's with one rounding more per layer. Edit a method's graph before its first call.
int moveLayerOutputsOneUlp(torch::jit::Graph& graph);

} // namespace xalloc::tspass
