// Specializing a frozen model to its inputs' ranks (specialize.h).
#include "xalloc/tspass/specialize.h"

#include <algorithm>

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include "ranks.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/model_io.h"

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

std::optional<c10::IValue> constantKey(const Value* v) {
  auto iv = torch::jit::toIValue(v);
  if (iv && (iv->isString() || iv->isInt()))
    return iv;
  return std::nullopt;
}

bool sameKey(const c10::IValue& a, const c10::IValue& b) {
  if (a.isString() && b.isString())
    return a.toStringRef() == b.toStringRef();
  return a.isInt() && b.isInt() && a.toInt() == b.toInt();
}

// Uses of a dict that read it without changing which value a key holds.
bool readsDictOnly(const Node* n) {
  return n->kind() == c10::prim::Return || hasKind(n, "aten::values") || hasKind(n, "aten::keys") ||
         hasKind(n, "aten::items") || hasKind(n, "aten::len") || hasKind(n, "aten::__contains__");
}

// Each read of a constant key from a dict made in the graph's top level and only ever given
// items under constant keys there (aten::dict + aten::_set_item, or prim::DictConstruct) reads
// the value last stored under that key before it instead. A dict that anything else may change
// (a pop, an update, a store under a computed key, a use in a branch or a call) is left as it is.
int forwardDictItems(torch::jit::Graph& g) {
  int forwarded = 0;
  for (Node* d : g.nodes()) {
    const bool empty_dict = hasKind(d, "aten::dict") && d->inputs().empty();
    if (!empty_dict && d->kind() != c10::prim::DictConstruct)
      continue;
    std::vector<Node*> stores, reads;
    bool only_items = true;
    for (const auto& u : d->output()->uses()) {
      Node* n = u.user;
      const bool keyed = u.offset == 0 && n->inputs().size() >= 2 && constantKey(n->input(1));
      if (n->owningBlock() == g.block() && keyed && hasKind(n, "aten::_set_item"))
        stores.push_back(n);
      else if (n->owningBlock() == g.block() && keyed && hasKind(n, "aten::__getitem__"))
        reads.push_back(n);
      else if (!readsDictOnly(n))
        only_items = false;
    }
    if (!only_items)
      continue;
    std::sort(stores.begin(), stores.end(), [](Node* a, Node* b) { return a->isBefore(b); });
    for (Node* r : reads) {
      const c10::IValue key = *constantKey(r->input(1));
      Value* stored = nullptr;
      for (std::size_t i = 0; !empty_dict && i + 1 < d->inputs().size(); i += 2)
        if (auto k = constantKey(d->input(i)); k && sameKey(*k, key))
          stored = d->input(i + 1);
      for (Node* s : stores) // in graph order: the last one before the read wins
        if (s->isBefore(r) && sameKey(*constantKey(s->input(1)), key))
          stored = s->input(2);
      if (!stored || !stored->type()->isSubtypeOf(*r->output()->type()))
        continue;
      r->output()->replaceAllUsesWith(stored);
      ++forwarded;
    }
  }
  return forwarded;
}

// Each aten::dim of a value whose rank is known becomes that constant.
int foldRanks(torch::jit::Graph& g, const std::vector<std::optional<int>>& input_ranks) {
  const Ranks ranks(g, input_ranks);
  int folded = 0;
  for (Node* n : allNodes(g)) {
    if (!hasKind(n, "aten::dim") || n->inputs().size() != 1 || !n->output()->hasUses())
      continue;
    const auto r = ranks.of(n->input(0));
    if (!r)
      continue;
    torch::jit::WithInsertPoint at(n);
    n->output()->replaceAllUsesWith(g.insertConstant(static_cast<std::int64_t>(*r)));
    ++folded;
  }
  return folded;
}

} // namespace

Specialized specializeGraph(const std::shared_ptr<torch::jit::Graph>& graph,
                            const std::vector<std::optional<int>>& input_ranks) {
  Specialized out;
  auto g = graph;
  // A branch inlined can make more ranks known (its op now top-level): until nothing changes.
  for (int round = 0; round < 8; ++round) {
    const int dicts = forwardDictItems(*g);
    const int dims = foldRanks(*g, input_ranks);
    if (dicts + dims == 0)
      break;
    out.dict_reads += dicts;
    out.rank_reads += dims;
    torch::jit::ConstantPropagationImmutableTypes(g);
    torch::jit::EliminateDeadCode(g);
  }
  return out;
}

Specialized specializeToInputRanks(LoadedModel& model, const std::string& method,
                                   const std::vector<std::optional<int>>& input_ranks) {
  if (!isFrozen(model.module))
    return {};
  const Specialized out = specializeGraph(inlineMethod(model.module, method), input_ranks);
  if (out.changed())
    canonicalize(model, method);
  return out;
}

} // namespace xalloc::tspass
