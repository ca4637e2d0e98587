// Twin regions (regions.cpp): regions with the same ops wired alike, constants of the same sizes
// and inputs of the same layouts take the same time in every candidate layout (a transformer's
// twelve layers, a ResNet stage's repeated blocks), so each is timed once per xprof run and
// the others take its times. Their outputs depend on their own weights and stay their own.
#pragma once

#include <string>
#include <vector>

#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/formats/region.h"

namespace xalloc::profiler::detail {

/// What a region's time depends on: its ops and how they are wired, its constants (a weight's
/// sizes, a convolution's stride and padding) and the layouts of its inputs; not their values.
/// Two regions with one key take the same time in every candidate layout. "" for a region with
/// blocks of its own (a branch): no key.
std::string regionTimingKey(const torch::jit::Graph& g, const std::vector<c10::IValue>& inputs);

/// Gives `out`'s candidates that ran on their own (`ran[i]`: the first run succeeded) the times
/// and rounds of `twin`'s candidate in the same layout; a twin's candidate that was not timed
/// gives its note instead.
void takeTwinTimes(formats::Region& out, const formats::Region& twin, const std::vector<bool>& ran);

} // namespace xalloc::profiler::detail
