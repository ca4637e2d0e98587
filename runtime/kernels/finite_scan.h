// One read pass over a float32 buffer that says whether every element is finite and how large
// the largest one is: what a packed op checks before it trusts a fused activation with its
// input (oneDNN's relu, clip and hard-sigmoid post-ops turn NaN into 0 where ATen keeps it), and
// before it trusts a reordered sum not to overflow where ATen's would not.
#pragma once

#include <cstdint>

namespace xalloc::runtime {

struct FloatScan {
  bool finite = true; ///< no NaN and no infinity
  bool has_nan = false;
  float max_abs = 0.f; ///< the largest |x| (meaningful when finite)
};

/// Scans n floats (n >= 0; p may be null when n is 0).
FloatScan scanFloats(const float* p, std::int64_t n);

/// True when one of the n floats is a NaN (infinities are fine).
bool anyNaN(const float* p, std::int64_t n);

} // namespace xalloc::runtime
