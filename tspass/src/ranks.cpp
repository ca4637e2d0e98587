// Static ranks of the top-level tensor values (ranks.h).
#include "ranks.h"

#include <algorithm>
#include <string>

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/layout_families.h"

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

bool isTensor(const Value* v) {
  return v->type()->cast<c10::TensorType>() != nullptr;
}

} // namespace

Ranks::Ranks(torch::jit::Graph& g, const std::vector<std::optional<int>>& input_ranks) {
  const auto inputs = g.inputs();
  for (std::size_t i = 1; i < inputs.size(); ++i)
    if (i - 1 < input_ranks.size() && input_ranks[i - 1])
      ranks_[inputs[i]] = *input_ranks[i - 1];
  for (Node* n : allNodes(g)) // a node before the nodes of its blocks
    visit(n);
}

std::optional<int> Ranks::of(const Value* v) const {
  auto it = ranks_.find(v);
  if (it != ranks_.end())
    return it->second;
  if (v->node()->kind() == c10::prim::Constant) {
    auto iv = torch::jit::toIValue(v);
    if (iv && iv->isTensor())
      return static_cast<int>(iv->toTensor().dim());
  }
  return std::nullopt;
}

void Ranks::set(const Value* v, std::optional<int> r) {
  if (r)
    ranks_[v] = *r;
}

namespace {

std::optional<int> listLength(const Value* list) {
  if (list->node()->kind() == c10::prim::ListConstruct)
    return static_cast<int>(list->node()->inputs().size());
  auto iv = torch::jit::toIValue(list);
  if (iv && iv->isIntList())
    return static_cast<int>(iv->toIntList().size());
  return std::nullopt;
}
} // namespace

void Ranks::visit(Node* n) {
  if (n->outputs().empty())
    return;
  const std::string k = n->kind().toQualString();
  const FamilyInfo f = layoutFamily(n);
  if (f.family != LayoutFamily::None) {
    std::optional<int> r;
    for (std::size_t i : activationInputs(n, f.family)) {
      auto ri = of(n->input(i));
      if (!ri) {
        // A convolution whose input's rank is not known here (a detector's backbone reads an
        // image batched from a list, padded in place): batched, as its constant weight says
        // (conv2d's weight is 4-D, conv3d's 5-D). The profile checks it on the values the
        // region really gets; a 3-D (unbatched) input leaves the region out there.
        if (f.family == LayoutFamily::Conv)
          if (auto w = torch::jit::toIValue(n->input(1)); w && w->isTensor())
            ri = static_cast<int>(w->toTensor().dim());
        if (!ri)
          return;
      }
      r = std::max(r.value_or(0), *ri);
    }
    set(n->output(), r);
    return;
  }
  if (k == "aten::view" || k == "aten::reshape" || k == "aten::permute") {
    set(n->output(), listLength(n->input(1)));
  } else if (k == "aten::flatten") {
    auto r = of(n->input(0));
    auto s = constantInt(n->input(1)), e = constantInt(n->input(2));
    if (r && s && e) {
      const std::int64_t rr = std::max(*r, 1);
      const std::int64_t s0 = *s < 0 ? *s + rr : *s, e0 = *e < 0 ? *e + rr : *e;
      set(n->output(), static_cast<int>(rr - (e0 - s0)));
    }
  } else if (k == "aten::contiguous" || k == "aten::clone" || k == "aten::transpose" ||
             k == "aten::to" || k == "aten::detach" || k == "aten::channel_shuffle") {
    if (isTensor(n->output()))
      set(n->output(), of(n->input(0)));
  } else if (k == "aten::cat" && n->input(0)->node()->kind() == c10::prim::ListConstruct) {
    std::optional<int> r;
    for (const Value* v : n->input(0)->node()->inputs()) {
      auto ri = of(v);
      if (!ri || (r && *r != *ri))
        return;
      r = ri;
    }
    set(n->output(), r);
  } else if (k == "prim::ListUnpack") {
    const Node* src = n->input(0)->node();
    const std::string sk = src->kind().toQualString();
    if (sk == "aten::chunk" || sk == "aten::split" || sk == "aten::unsafe_chunk" ||
        sk == "aten::split_with_sizes")
      if (auto r = of(src->input(0)))
        for (const Value* o : n->outputs())
          set(o, r);
  }
}

} // namespace xalloc::tspass
