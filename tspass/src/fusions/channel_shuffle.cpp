// Channel shuffles of a region's exit (ShuffleNet's `channel_shuffle`: a view into groups, a
// transpose, a copy, a view back) made one xalloc::channel_shuffle of the region's channels-last
// value: the same elements, without the exit conversion to row-major first (rewrite.h).
#include <vector>

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/rewrite.h"

#include "../layouts/edit.h"

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

// `v` is output `i` of prim::ListUnpack(aten::size(x)) of a 4-D x.
bool isSizeOf(const Value* v, const Value* x, std::size_t i) {
  const Node* u = v->node();
  if (!hasKind(u, "prim::ListUnpack") || u->outputs().size() != 4 || v->offset() != i)
    return false;
  const Node* s = u->input(0)->node();
  return hasKind(s, "aten::size") && s->inputs().size() == 1 && s->input(0) == x;
}

// What the shuffle's result may be read by when it comes out channels-last where the idiom's
// came out row-major: ops that read any layout and hand on none of their own (a conversion, a
// packed convolution, sizes), and chunks or splits of channels whose parts are read so.
bool readsAnyLayout(const Value* v) {
  for (const auto& u : v->uses()) {
    const Node* n = u.user;
    if (hasKind(n, "aten::size") || hasKind(n, "aten::dim") || hasKind(n, "aten::contiguous"))
      continue;
    if ((hasKind(n, "xalloc::conv2d_packed") || hasKind(n, "xalloc::conv2d_packed_add")) &&
        u.offset == 0)
      continue;
    if ((hasKind(n, "aten::chunk") || hasKind(n, "aten::split")) && u.offset == 0 &&
        constantInt(n->input(2)) == 1 && n->output()->uses().size() == 1 &&
        hasKind(n->output()->uses()[0].user, "prim::ListUnpack")) {
      for (const Value* part : n->output()->uses()[0].user->outputs())
        if (!readsAnyLayout(part))
          return false;
      continue;
    }
    return false;
  }
  return true;
}

struct Shuffle {
  // view(contiguous(transpose(view(S, [b, g, c // g, h, w]), 1, 2)), [b, -1 or c, h, w])
  Node* last_view;
  Value* source; // the region's value, before its exit conversion
  std::int64_t groups;
  std::vector<Node*> dead; // the idiom's nodes, the last view first
};

std::optional<Shuffle> matchShuffle(Node* v5) {
  if (!hasKind(v5, "aten::view"))
    return std::nullopt;
  Node* c5 = v5->input(0)->node();
  if (!isRowMajorContiguousCall(c5) || c5->output()->uses().size() != 1)
    return std::nullopt;
  Node* t = c5->input(0)->node();
  if (!hasKind(t, "aten::transpose") || t->output()->uses().size() != 1 ||
      constantInt(t->input(1)) != 1 || constantInt(t->input(2)) != 2)
    return std::nullopt;
  Node* v4 = t->input(0)->node();
  if (!hasKind(v4, "aten::view") || v4->output()->uses().size() != 1)
    return std::nullopt;
  Node* exit = v4->input(0)->node();
  if (!isRowMajorContiguousCall(exit) || exit->output()->uses().size() != 1)
    return std::nullopt; // no exit conversion to drop: nothing gained
  Value* x = exit->input(0);
  // [b, g, c // g, h, w] of x's sizes, then [b, -1 (or c), h, w].
  Node* l4 = v4->input(1)->node();
  Node* l5 = v5->input(1)->node();
  if (!hasKind(l4, "prim::ListConstruct") || l4->inputs().size() != 5 ||
      !hasKind(l5, "prim::ListConstruct") || l5->inputs().size() != 4)
    return std::nullopt;
  const auto g = constantInt(l4->input(1));
  Node* q = l4->input(2)->node();
  if (!g || *g < 1 || !hasKind(q, "aten::floordiv") || !isSizeOf(q->input(0), x, 1) ||
      constantInt(q->input(1)) != g)
    return std::nullopt;
  if (!isSizeOf(l4->input(0), x, 0) || !isSizeOf(l4->input(3), x, 2) ||
      !isSizeOf(l4->input(4), x, 3) || l5->input(0) != l4->input(0) ||
      (constantInt(l5->input(1)) != -1 && !isSizeOf(l5->input(1), x, 1)) ||
      l5->input(2) != l4->input(3) || l5->input(3) != l4->input(4))
    return std::nullopt;
  if (!readsAnyLayout(v5->output()))
    return std::nullopt;
  std::vector<Node*> dead{v5, c5, t, v4, exit};
  if (l5->output()->uses().size() == 1)
    dead.push_back(l5);
  if (l4->output()->uses().size() == 1)
    dead.push_back(l4);
  return Shuffle{v5, x, *g, std::move(dead)};
}

} // namespace

std::int64_t shuffleChannelsInPlace(torch::jit::Graph& graph) {
  std::vector<Shuffle> found;
  for (Node* n : allNodes(graph))
    if (auto s = matchShuffle(n))
      found.push_back(std::move(*s));
  for (Shuffle& s : found) {
    torch::jit::WithInsertPoint guard(s.last_view);
    Value* g = graph.insertConstant(s.groups);
    Node* shuffle =
        layouts::place(graph.create(layouts::sym("xalloc::channel_shuffle"), {s.source, g}),
                       s.last_view, s.last_view);
    shuffle->output()->setType(s.last_view->output()->type());
    s.last_view->output()->replaceAllUsesWith(shuffle->output());
    for (Node* d : s.dead)
      if (!d->hasUses())
        d->destroy();
  }
  return static_cast<std::int64_t>(found.size());
}

} // namespace xalloc::tspass
