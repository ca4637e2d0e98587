// Entries the packed convolutions convert themselves (rewrite.h): an aten::contiguous to
// channels-last (channels-last-3d) whose one reader is a packed 2-D (3-D) convolution's input goes,
// and the convolution converts with the runtime's kernels (runtime/kernels/channels_last.h). A
// model's NCHW input is the usual one: ATen's copy of a cold 1x3x224x224 input costs ~80 us a call
// on AVX-512, the runtime's ~11.
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/rewrite.h"

namespace xalloc::tspass {

using torch::jit::Node;

std::int64_t packedConvsConvertEntries(torch::jit::Graph& graph) {
  std::vector<Node*> drop;
  for (Node* n : allNodes(graph)) {
    const bool cl2d = isChannelsLastContiguousCall(n);
    if (!cl2d && !isChannelsLast3dContiguousCall(n))
      continue;
    // One reader, the convolution's input: two readers would each convert.
    const auto& uses = n->output()->uses();
    if (uses.size() != 1 || uses[0].offset != 0)
      continue;
    const Node* u = uses[0].user;
    if (cl2d ? !(hasKind(u, "xalloc::conv2d_packed") || hasKind(u, "xalloc::conv2d_packed_add"))
             : !(hasKind(u, "xalloc::conv3d_packed") || hasKind(u, "xalloc::conv3d_packed_add")))
      continue;
    drop.push_back(n);
  }
  for (Node* n : drop) {
    n->output()->replaceAllUsesWith(n->input(0));
    n->destroy();
  }
  return static_cast<std::int64_t>(drop.size());
}

} // namespace xalloc::tspass
