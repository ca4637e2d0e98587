// Whether a rewritten model's outputs, beyond the tolerance, still differ from the original's
// by no more than float32's own noise: what one ulp of the inputs or at each layer's output,
// PyTorch's own channels-last, or freezing alone, already moves the original's outputs by
// (formats::noiseBound).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>

namespace xalloc::rewriter {

struct NoiseVerdict {
  bool within = false;    // the rewrite's change is within float32's own noise
  double counted = 0;     // the error the input counts for (order-blind where compared so)
  double bound = 0;       // what it was judged against
  std::string why;        // which reference, in words ("" when not within)
  bool unordered = false; // compared blind to order (the original's own outputs reorder)
};

/// What the original's own outputs are moved by, on one input, and what moved them, in words.
struct NoiseReference {
  c10::IValue outputs;
  const char* what;
};
/// The references' words: the inputs one ulp away (a draw), each layer's output moved one ulp
/// (tspass/layer_noise.h), and PyTorch's own channels-last (the original's 4-D and 5-D
/// parameters made channels-last, as `model.to(memory_format=torch.channels_last)` makes them:
/// ATen's convolutions in another summation order, a change users make in one line).
inline constexpr const char* kInputUlp = "one ulp of the inputs";
inline constexpr const char* kLayerUlp = "one ulp at each layer's output (another summation order)";
inline constexpr const char* kChannelsLast =
    "PyTorch's own channels-last (model.to(memory_format=torch.channels_last))";

/// `out_a`, `out_b`: the original's and the rewritten model's outputs on one input, `error`
/// their maxRelativeError (beyond `tolerance`). `references`: the original's outputs on that
/// input moved by float32's own noise (NoiseReference); `frozen_alone`: the original frozen
/// alone, when the rewrite froze it.
/// A rewrite whose outputs are the frozen original's bit for bit is within; otherwise within
/// noiseBound of the largest finite reference; and where a reference reorders the original's
/// outputs (unbounded element by element: top-k, NMS), within noiseBound of the references
/// compared blind to order (maxSortedError).
NoiseVerdict judgeBesideNoise(const c10::IValue& out_a, const c10::IValue& out_b, double error,
                              double tolerance, const std::vector<NoiseReference>& references,
                              const std::optional<c10::IValue>& frozen_alone);

/// "1.2e-04": how the verification messages write an error.
std::string sci(double x);

} // namespace xalloc::rewriter
