// xrewrite's check of a rewritten TorchScript model: its outputs against the original's on the
// same inputs, bit for bit or within the tolerance and float32's own noise (noise_verdict.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>

#include "xalloc/formats/documents.h"

namespace xalloc::rewriter {

/// What verification found: the largest error over all runs, and what went wrong ("" if not).
struct Verified {
  std::string problem;
  double error = 0;      // max |new - original| over max |original|, per output, the worst
  bool same_bits = true; // every run's outputs bit-identical (an error of 0 may still differ in
                         // the sign of a zero or a NaN's payload)
  /// The original's floating-point outputs held one repeated value on every input (torchvision's
  /// ViT with random weights: a zero-initialized head gives all zeros): nothing was checked.
  bool constant_outputs = false;
  /// The tensor elements compared, over every run: 0 when the outputs were empty (an empty
  /// batch), so nothing was checked.
  std::int64_t elements = 0;
  /// Where an input's error passed the tolerance yet stayed within what float32 rounding (of
  /// the inputs, at each layer) or freezing alone moves the original's own outputs: the largest
  /// such bound,
  /// and what it was ("" when every error was within the tolerance).
  double bound = 0;
  std::string bound_why;
  /// Some input's outputs were compared blind to order (the original's own reorder).
  bool unordered = false;
};

/// Runs `method` of the model at `a` and the rewritten one (`b_bytes`, to be written to `b`) on
/// the same inputs and compares their outputs: bit for bit when `tolerance` is 0, else within it
/// (and, `within_noise`, within float32's own noise: formats::noiseBound of what one ulp of the
/// inputs or at each layer's output, or freezing alone, moves the original's). Inputs: `runs`
/// seeded example inputs (the profile's and fresh ones), or the `fixed` inputs (read from
/// `fixed_file`) and `runs` fresh inputs of the same shapes.
Verified verifyOutputs(const std::string& a, const std::string& b_bytes, const std::string& b,
                       const std::string& method, const std::vector<formats::InputSpec>& specs,
                       int runs, const std::vector<c10::IValue>* fixed,
                       const std::string& fixed_file, double tolerance, bool froze,
                       bool within_noise);

} // namespace xalloc::rewriter
