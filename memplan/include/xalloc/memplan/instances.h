// Synthetic planning instances for tests and benchmarks, seeded and reproducible.
#pragma once

#include <cstdint>
#include <vector>

#include "xalloc/memplan/planner.h"

namespace xalloc::memplan {

/// `ops` tensors, one produced per op and read by a few later ops (mostly soon after, one in
/// eight much later, like a skip connection); sizes log-uniform from 64 B to 4 MiB. Harsh: sizes
/// vary wildly, which fragments memory.
std::vector<TensorSpec> randomDagInstance(std::uint64_t seed, int ops);

/// A network-shaped DAG of about `ops` ops: stages of residual blocks (the block input lives
/// across the block), expansion layers 4x wider, occasional two-branch concatenations; sizes
/// shrink or grow between stages and jitter +-25% within one.
std::vector<TensorSpec> networkDagInstance(std::uint64_t seed, int ops);

} // namespace xalloc::memplan
