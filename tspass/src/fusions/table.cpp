// The fast form's fusions (fusions.h) as fusions.def lists them, in that order.
#include "xalloc/tspass/fusions.h"

#include <torch/csrc/jit/ir/ir.h>

namespace xalloc::tspass {

#define FUSION(name, function, what) std::int64_t function(torch::jit::Graph& graph);
#include "fusions.def"
#undef FUSION

const std::vector<Fusion>& fusions() {
  static const std::vector<Fusion> all = {
#define FUSION(name, function, what) {#name, what, function},
#include "fusions.def"
#undef FUSION
  };
  return all;
}

const Fusion* findFusion(const std::string& name) {
  for (const Fusion& f : fusions())
    if (name == f.name)
      return &f;
  return nullptr;
}

std::vector<FusionRun> runFusions(torch::jit::Graph& graph, const std::set<std::string>& off) {
  std::vector<FusionRun> out;
  for (const Fusion& f : fusions())
    if (!off.count(f.name))
      out.push_back({f.name, f.run(graph)});
  return out;
}

} // namespace xalloc::tspass
