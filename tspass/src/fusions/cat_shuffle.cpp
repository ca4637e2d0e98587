// A ShuffleNetV2 unit's end and the next unit's start: `channel_shuffle(cat([a, b], 1), 2)`
// (the channel_shuffle fusion's xalloc::channel_shuffle), then, when that is all that reads it,
// `chunk(2, 1)` unpacked into two halves, made one xalloc::cat_shuffle(a, b) or
// xalloc::cat_shuffle_chunk(a, b) (runtime/kernels/channel_shuffle.cpp). A conversion that made
// a piece dense for the concatenation alone goes too: the op reads a slice of channels where it
// is. The same elements, bit for bit; four copies of each unit's activation become one.
#include <optional>
#include <vector>

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/rewrite.h"

#include "../layouts/edit.h"

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

struct CatShuffle {
  Node* cat = nullptr;
  Node* shuffle = nullptr;
  Node* list = nullptr;
  Node* convert[2] = {nullptr, nullptr}; // the conversion before each piece that goes, if any
  Node* chunk = nullptr;                 // with its unpack, when the shuffle's one reader is
  Node* unpack = nullptr;                // chunk(2, 1)
  std::vector<Node*> dead; // the nodes that go once the op replaces them, readers first

  // Piece i as the op reads it. Read when the op is made, not when matched: an earlier unit's
  // rewrite replaces the values its unpack made (this unit's pieces) with its op's outputs.
  Value* piece(std::size_t i) const { return convert[i] ? convert[i]->input(0) : list->input(i); }
};

// The conversion the concatenation's piece comes from when only it reads the conversion
// (aten::contiguous, in the same block, its input unwritten until the concatenation), or null.
Node* conversionOf(Value* piece, const Node* cat, const torch::jit::AliasDb& alias) {
  Node* c = piece->node();
  if (!hasKind(c, "aten::contiguous") || piece->uses().size() != 1 ||
      c->owningBlock() != cat->owningBlock() ||
      !layouts::unwrittenBetween(c, cat, {c->input(0)}, alias))
    return nullptr;
  return c;
}

std::optional<CatShuffle> match(Node* shuffle, const torch::jit::AliasDb& alias) {
  if (!hasKind(shuffle, "xalloc::channel_shuffle") || constantInt(shuffle->input(1)) != 2)
    return std::nullopt;
  Node* cat = shuffle->input(0)->node();
  if (cat->kind() != c10::aten::cat || cat->output()->uses().size() != 1 ||
      constantInt(cat->input(1)) != 1 || cat->owningBlock() != shuffle->owningBlock())
    return std::nullopt;
  Node* list = cat->input(0)->node();
  if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 2 ||
      cat->input(0)->uses().size() != 1)
    return std::nullopt;
  CatShuffle m;
  m.cat = cat;
  m.shuffle = shuffle;
  m.list = list;
  Node* chunk = shuffle->output()->uses().size() == 1 ? shuffle->output()->uses()[0].user : nullptr;
  if (chunk && hasKind(chunk, "aten::chunk") && constantInt(chunk->input(1)) == 2 &&
      constantInt(chunk->input(2)) == 1 && chunk->output()->uses().size() == 1) {
    Node* unpack = chunk->output()->uses()[0].user;
    if (unpack->kind() == c10::prim::ListUnpack && unpack->outputs().size() == 2) {
      m.chunk = chunk;
      m.unpack = unpack;
      m.dead = {unpack, chunk};
    }
  }
  for (Node* n : {shuffle, cat, list})
    m.dead.push_back(n);
  for (std::size_t i = 0; i < 2; ++i)
    if ((m.convert[i] = conversionOf(list->input(i), cat, alias)))
      m.dead.push_back(m.convert[i]);
  return m;
}

} // namespace

std::int64_t fuseCatShuffles(torch::jit::Graph& graph) {
  // The shuffle fusion leaves the idiom's size reads of the concatenation to go unread.
  torch::jit::EliminateDeadCode(graph.block());
  std::vector<CatShuffle> found;
  {
    // The analysis borrows the graph for this scope (a shared_ptr that does not own it).
    torch::jit::AliasDb alias(
        std::shared_ptr<torch::jit::Graph>(&graph, [](torch::jit::Graph*) {}));
    for (Node* n : allNodes(graph))
      if (auto m = match(n, alias))
        found.push_back(std::move(*m));
  }
  for (CatShuffle& m : found) {
    // Where the concatenation read its pieces: nothing between writes them.
    if (m.chunk) {
      Node* op =
          graph.create(layouts::sym("xalloc::cat_shuffle_chunk"), {m.piece(0), m.piece(1)}, 2);
      layouts::place(op, m.cat, m.cat);
      for (std::size_t i = 0; i < 2; ++i) {
        op->output(i)->setType(m.unpack->output(i)->type());
        m.unpack->output(i)->replaceAllUsesWith(op->output(i));
      }
    } else {
      Node* op = layouts::place(
          graph.create(layouts::sym("xalloc::cat_shuffle"), {m.piece(0), m.piece(1)}), m.cat,
          m.cat);
      op->output()->setType(m.shuffle->output()->type());
      m.shuffle->output()->replaceAllUsesWith(op->output());
    }
    for (Node* d : m.dead)
      d->destroy();
  }
  return static_cast<std::int64_t>(found.size());
}

} // namespace xalloc::tspass
