// Squeeze-and-excitation blocks of a packed region made one xalloc::squeeze_excite (rewrite.h):
// `x * expand(reduce(adaptive_avg_pool2d(x, 1)))`, both convolutions packed, becomes one op that
// pools, runs the two packed convolutions and scales in one call
// (runtime/kernels/squeeze_excite.cpp).
#include <vector>

#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/rewrite.h"

#include "../layouts/edit.h"

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

// `v` is conv2d_packed(input, conv) read once (by the op being matched).
Node* packedConvReadOnce(Value* v) {
  Node* n = v->node();
  if (!hasKind(n, "xalloc::conv2d_packed") || v->uses().size() != 1)
    return nullptr;
  return n;
}

struct Block {
  Node* mul;
  Value* x;
  Value* reduce; // the PackedConv objects
  Value* expand;
  std::vector<Node*> dead; // mul first, then what only it read
};

std::optional<Block> matchBlock(Node* mul) {
  if (!hasKind(mul, "aten::mul") || mul->inputs().size() != 2)
    return std::nullopt;
  for (std::size_t side = 0; side < 2; ++side) {
    Value* x = mul->input(1 - side);
    Node* expand = packedConvReadOnce(mul->input(side));
    if (!expand)
      continue;
    Node* reduce = packedConvReadOnce(expand->input(0));
    if (!reduce)
      continue;
    Node* pool = reduce->input(0)->node();
    if (!hasKind(pool, "aten::adaptive_avg_pool2d") || pool->output()->uses().size() != 1 ||
        pool->input(0) != x || layouts::intList(pool->input(1)) != std::vector<std::int64_t>{1, 1})
      continue;
    std::vector<Node*> dead{mul, expand, reduce, pool};
    if (hasKind(pool->input(1)->node(), "prim::ListConstruct") &&
        pool->input(1)->uses().size() == 1)
      dead.push_back(pool->input(1)->node());
    return Block{mul, x, reduce->input(1), expand->input(1), std::move(dead)};
  }
  return std::nullopt;
}

} // namespace

std::int64_t fuseSqueezeExcite(torch::jit::Graph& graph) {
  std::vector<Block> found;
  for (Node* n : allNodes(graph))
    if (auto b = matchBlock(n))
      found.push_back(std::move(*b));
  for (Block& b : found) {
    Node* se = layouts::place(
        graph.create(layouts::sym("xalloc::squeeze_excite"), {b.x, b.reduce, b.expand}), b.mul,
        b.mul);
    se->output()->setType(b.mul->output()->type());
    b.mul->output()->replaceAllUsesWith(se->output());
    for (Node* d : b.dead)
      if (!d->hasUses())
        d->destroy();
  }
  return static_cast<std::int64_t>(found.size());
}

} // namespace xalloc::tspass
