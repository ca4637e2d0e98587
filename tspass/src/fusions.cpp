// The fast form's fusions in the order they run (fusions.h): the shuffle first (its result is
// what the next regions' entries read), then the blocks inside regions, the lists of feature maps
// concatenated, the entries the packed convolutions convert themselves, and last the activation
// arena's bracket around the whole graph.
#include "xalloc/tspass/fusions.h"

#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/rewrite.h"

namespace xalloc::tspass {

namespace {
std::int64_t scopeActivationsCount(torch::jit::Graph& graph) {
  return scopeActivations(graph) ? 1 : 0;
}
} // namespace

const std::vector<Fusion>& fusions() {
  static const std::vector<Fusion> all = {
      {"channel_shuffle",
       "ShuffleNet's view-transpose-view shuffle of a region's exit as xalloc::channel_shuffle of "
       "its channels-last value (no exit conversion)",
       shuffleChannelsInPlace},
      {"squeeze_excite",
       "a squeeze-and-excitation block whose 1x1 convolutions are packed as one "
       "xalloc::squeeze_excite",
       fuseSqueezeExcite},
      {"channel_lists",
       "lists of feature maps only channel concatenations read (DenseNet) kept channels-last",
       channelListsChannelsLast},
      {"packed_entries",
       "an entry conversion whose one reader is a packed convolution left to the convolution",
       packedConvsConvertEntries},
      {"activation_arena",
       "the graph bracketed by xalloc::activations_enter/exit: its tensors from the runtime's "
       "activation arena",
       scopeActivationsCount},
  };
  return all;
}

const Fusion* findFusion(const std::string& name) {
  for (const Fusion& f : fusions())
    if (name == f.name)
      return &f;
  return nullptr;
}

std::string fusionNames() {
  std::string out;
  for (const Fusion& f : fusions())
    out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

std::vector<FusionRun> runFusions(torch::jit::Graph& graph, const std::set<std::string>& off) {
  std::vector<FusionRun> out;
  for (const Fusion& f : fusions())
    if (!off.count(f.name))
      out.push_back({f.name, f.run(graph)});
  return out;
}

} // namespace xalloc::tspass
