// Channels-last with packed convolutions and residual adds fused: as channels_last_packed.cpp,
// and a convolution whose only reader is a residual add (`y = conv(x) + r`, alpha 1, r a tensor;
// the in-place `conv(x) += r` too), with the activation that is the add's only reader, becomes
// one xalloc::conv2d_packed_add(x, w, r) (conv3d_packed_add for a 3-D one): oneDNN adds r in the
// convolution's own pass (a sum post-op) where ATen reads and writes the output twice more. The
// convolution moves down to the add (r may be made after it, as a ResNet's downsampling is) only
// where the alias analysis says nothing in between writes what it reads.
#include <algorithm>
#include <unordered_set>

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/constants.h>

#include "packed_convs.h"
#include "xalloc/tspass/layout_families.h"

namespace xalloc::tspass {

namespace {

using torch::jit::Node;
using torch::jit::Value;

// conv -> add (-> activation): the ops one conv2d_packed_add replaces.
struct ResidualAdd {
  Node* conv = nullptr;
  Node* add = nullptr;
  Node* act = nullptr; // the activation fused after the add, or none
  /// Which of the add's inputs is the residual. An index, not the value: fusing an earlier add
  /// replaces the value a later one reads (a block's output is the next block's residual).
  std::size_t residual = 0;
  std::string post; // "add" or "add+relu"
};

bool isAdd(const Node* n) {
  return n->kind() == c10::aten::add || n->kind() == layouts::sym("aten::add_");
}

// The add that is `conv`'s only reader, as a residual add the packed op can compute.
std::optional<ResidualAdd> residualAddAfter(Node* conv, const std::unordered_set<const Node*>& in) {
  Value* y = conv->output();
  if (y->uses().size() != 1 || !layouts::convParams(conv))
    return std::nullopt;
  Node* add = y->uses()[0].user;
  if (!in.count(add) || !isAdd(add) || add->inputs().size() != 3 ||
      add->owningBlock() != conv->owningBlock())
    return std::nullopt;
  auto alpha = torch::jit::toIValue(add->input(2));
  if (!alpha ||
      !((alpha->isInt() && alpha->toInt() == 1) || (alpha->isDouble() && alpha->toDouble() == 1.0)))
    return std::nullopt;
  // The in-place add writes its first operand: only the convolution's fresh output.
  const std::size_t other = add->input(0) == y ? 1 : 0;
  if (add->input(other) == y || (add->kind() != c10::aten::add && other == 0) ||
      !add->input(other)->type()->cast<c10::TensorType>())
    return std::nullopt;
  ResidualAdd r{conv, add, nullptr, other, "add"};
  if (add->output()->uses().size() == 1) {
    Node* u = add->output()->uses()[0].user;
    const FamilyInfo f = layoutFamily(u);
    if (in.count(u) && u->input(0) == add->output() && !f.fusible.empty() &&
        u->owningBlock() == add->owningBlock()) {
      r.act = u;
      r.post = "add+" + f.fusible;
    }
  }
  return r;
}

} // namespace

namespace layouts {
void fuseResidualAdds(torch::jit::Graph& g, LayoutRegion& r, RegionEdit& e,
                      const std::unordered_set<const Node*>* only) {
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  std::vector<ResidualAdd> found;
  {
    // Moves first, with one alias analysis of the graph as it is; the edits after. The
    // analysis borrows the graph for this scope (a shared_ptr that does not own it).
    torch::jit::AliasDb alias(std::shared_ptr<torch::jit::Graph>(&g, [](torch::jit::Graph*) {}));
    // An add of two convolutions (LR-ASPP's two classifiers) fuses into the first one only.
    std::unordered_set<const Node*> adds;
    for (Node* n : r.nodes)
      if (isConv(n))
        if (auto f = residualAddAfter(n, in))
          if ((!only || only->count(f->add)) && !adds.count(f->add) &&
              alias.moveBeforeTopologicallyValid(f->conv, f->add)) {
            adds.insert(f->add);
            found.push_back(*f);
          }
  }
  for (const ResidualAdd& f : found) {
    Value* w = layouts::topConstant(g, layouts::packedConv(f.conv, f.post));
    Node* last = f.act ? f.act : f.add;
    Node* run = layouts::place(g.create(layouts::sym(layouts::packedConvKind(f.conv, true)),
                                        {f.conv->input(0), w, f.add->input(f.residual)}),
                               f.add, f.conv);
    run->output()->setType(last->output()->type());
    run->output()->copyMetadata(last->output());
    // The activation and the add go, their readers reading the packed op; then the convolution.
    if (f.act)
      layouts::dropNode(f.act, run->output(), r.nodes);
    layouts::dropNode(f.add, run->output(), r.nodes);
    layouts::replaceNode(f.conv, run, r.nodes);
    ++e.packed;
    e.fused += f.act ? 2 : 1;
  }
}

RegionEdit ChannelsLastPackedAdd::apply(torch::jit::Graph& g, LayoutRegion& r) const {
  // Without a residual add to fuse it is channels_last+packed: not measured twice.
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  if (std::none_of(r.nodes.begin(), r.nodes.end(),
                   [&](Node* n) { return isConv(n) && residualAddAfter(n, in); })) {
    RegionEdit e;
    e.message = "no convolution of the region is read by a residual add alone: it is " +
                std::string(mf_ == c10::MemoryFormat::ChannelsLast3d ? "channels_last_3d+packed"
                                                                     : "channels_last+packed");
    return e;
  }
  return applyChannelsLast(g, r, mf_, [&](RegionEdit& e) {
    splitConvsOfCats(g, r);
    fuseResidualAdds(g, r, e, nullptr);
    packConvs(g, r, e);
    poolWithoutIndices(g, r, e);
  });
}

bool ChannelsLastPackedAdd::appliedAt(const Node* now, const std::string&) const {
  return isPackedConv(now);
}
} // namespace layouts

const RegionLayout& channels_last_packed_addLayout() {
  static const layouts::ChannelsLastPackedAdd layout("channels_last+packed+add",
                                                     c10::MemoryFormat::ChannelsLast);
  return layout;
}

} // namespace xalloc::tspass
