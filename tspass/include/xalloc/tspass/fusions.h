// The fast form's fusions: graph passes that run after the regions that use the runtime's ops,
// each with a name (what `xrewrite --no-fusion` switches off and the stored schedule records),
// listed here in the order they run. A fusion rewrites a pattern of ops across a region's border
// or inside it into the runtime's ops; it never changes a layout decision (layouts are
// region_layouts.h's). Adding one: its pass in a file of its own under tspass/src/fusions/ and a
// row in fusions.def (CMake builds the file, the table lists it), and a test.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "xalloc/tspass/fusion_names.h" // fusionNames(), isFusionName()

namespace torch::jit {
struct Graph;
} // namespace torch::jit

namespace xalloc::tspass {

struct Fusion {
  const char* name; // "squeeze_excite"
  const char* what; // one line, for --help and the docs
  /// Rewrites every place the fusion applies to in the graph; returns how many.
  std::int64_t (*run)(torch::jit::Graph& graph);
};

/// Every fusion, in the order they run.
const std::vector<Fusion>& fusions();

/// The fusion called `name`, or nullptr.
const Fusion* findFusion(const std::string& name);

/// How many places one fusion rewrote.
struct FusionRun {
  std::string name;
  std::int64_t count = 0;
};

/// Runs every fusion not named in `off`, in order.
std::vector<FusionRun> runFusions(torch::jit::Graph& graph, const std::set<std::string>& off);

} // namespace xalloc::tspass
