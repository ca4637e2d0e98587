// The steps region layouts build their edits from (edit.h).
#include "edit.h"

#include <algorithm>
#include <unordered_set>

#include <torch/csrc/jit/ir/constants.h>

#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/layout_families.h"
#include "xalloc/tspass/rewrite.h"

namespace xalloc::tspass::layouts {

c10::Symbol sym(const char* qual) {
  return c10::Symbol::fromQualString(qual);
}

bool isInPlaceWriteOf(const Node* n, const Value* v) {
  return !n->inputs().empty() && n->input(0) == v && layoutFamily(n).in_place;
}

// A node placed as `anchor` is in the diff: it borrows its source range and module scope.
Node* place(Node* n, Node* before, Node* anchor) {
  n->insertBefore(before);
  n->setSourceRange(anchor->sourceRange());
  n->setScope(anchor->scope());
  return n;
}

// The top-level node `u` sits in (u itself, or the block owner above it).
Node* topLevel(Node* u, const torch::jit::Block* top) {
  while (u->owningBlock() != top && u->owningBlock()->owningNode())
    u = u->owningBlock()->owningNode();
  return u;
}

// A constant at the top of the graph, where it dominates every use.
Value* topConstant(torch::jit::Graph& g, const c10::IValue& v) {
  torch::jit::WithInsertPoint guard(*g.nodes().begin());
  return g.insertConstant(v);
}

Node* contiguousNode(torch::jit::Graph& g, Value* v, c10::MemoryFormat mf) {
  Node* n = g.create(c10::aten::contiguous, {v, topConstant(g, static_cast<std::int64_t>(mf))});
  n->output()->setType(v->type());
  return n;
}

// A constant list of ints, or one built by prim::ListConstruct of constants (as a saved and
// loaded graph spells `[1, 1]`).
std::optional<std::vector<std::int64_t>> intList(const Value* v) {
  if (v->node()->kind() == c10::prim::ListConstruct) {
    std::vector<std::int64_t> out;
    for (const Value* e : v->node()->inputs()) {
      auto iv = torch::jit::toIValue(e);
      if (!iv || !iv->isInt())
        return std::nullopt;
      out.push_back(iv->toInt());
    }
    return out;
  }
  auto iv = torch::jit::toIValue(v);
  if (!iv || !iv->isIntList())
    return std::nullopt;
  return iv->toIntVector();
}

std::optional<at::Tensor> constantTensor(const Value* v) {
  if (v->node()->kind() != c10::prim::Constant)
    return std::nullopt;
  auto iv = torch::jit::toIValue(v);
  if (!iv || !iv->isTensor())
    return std::nullopt;
  return iv->toTensor();
}

std::optional<ConvParams> convParams(const Node* n) {
  ConvParams p;
  auto w = constantTensor(n->input(1));
  auto s = intList(n->input(3)), pd = intList(n->input(4)), d = intList(n->input(5));
  auto g = torch::jit::toIValue(n->input(6));
  if (!w || !s || !pd || !d || !g || !g->isInt() || w->scalar_type() != at::kFloat)
    return std::nullopt;
  if (n->input(2)->type()->kind() != c10::TypeKind::NoneType) {
    auto b = constantTensor(n->input(2));
    if (!b || b->scalar_type() != at::kFloat)
      return std::nullopt;
    p.bias = *b;
  }
  const std::size_t dims = static_cast<std::size_t>(w->dim()) - 2;
  auto expand = [&](std::vector<std::int64_t> v) {
    if (v.size() == 1)
      v.assign(dims, v[0]);
    return v;
  };
  p.weight = *w;
  p.stride = expand(*s);
  p.padding = expand(*pd);
  p.dilation = expand(*d);
  p.groups = g->toInt();
  if (p.stride.size() != dims || p.padding.size() != dims || p.dilation.size() != dims)
    return std::nullopt;
  return p;
}

void replaceNode(Node* old_node, Node* new_node, std::vector<Node*>& nodes) {
  old_node->output()->replaceAllUsesWith(new_node->output());
  std::replace(nodes.begin(), nodes.end(), old_node, new_node);
  old_node->destroy();
}

void dropNode(Node* n, Value* replacement, std::vector<Node*>& nodes) {
  n->output()->replaceAllUsesWith(replacement);
  removeNode(n, nodes);
}

void removeNode(Node* n, std::vector<Node*>& nodes) {
  nodes.erase(std::remove(nodes.begin(), nodes.end(), n), nodes.end());
  n->destroy();
}

bool isConv(const Node* n) {
  return n->kind() == c10::aten::conv2d || n->kind() == c10::aten::conv3d;
}

bool unwrittenBetween(Node* from, const Node* to, const torch::jit::ValueSet& vs,
                      const torch::jit::AliasDb& alias) {
  for (Node* m = from->next(); m != to; m = m->next())
    if (m->kind() == c10::prim::Return || alias.writesToAlias(m, vs))
      return false;
  return true;
}

Value* Converter::convert(Value* v, Node* user, const std::string& key,
                          const std::function<Node*(Value*)>& make) {
  Node* at = topLevel(user, top_);
  auto& list = made_[{v, key}];
  for (Node* c : list)
    if (c->isBefore(at) && !writtenBetween(v, c, at))
      return c->output();
  Node* c = make(v);
  place(c, at, at->kind() == c10::prim::Return ? v->node() : at);
  list.push_back(c);
  ++count_;
  return c->output();
}

bool Converter::writtenBetween(const Value* v, const Node* from, const Node* to) const {
  for (const Node* w : writers_)
    if (isInPlaceWriteOf(w, v) && from->isBefore(w) && w->isBefore(to))
      return true;
  return false;
}

std::vector<Node*> inPlaceWriters(const LayoutRegion& r) {
  std::vector<Node*> writers;
  for (Node* n : r.nodes)
    if (layoutFamily(n).in_place)
      writers.push_back(n);
  return writers;
}

void packOps(torch::jit::Graph& g, LayoutRegion& r, RegionEdit& e, const char* kind,
             const char* packed_kind,
             const std::function<c10::IValue(const Node*, const std::string& post)>& pack) {
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  for (Node* n : std::vector<Node*>(r.nodes)) {
    if (n->kind() != sym(kind))
      continue;
    Node* act = nullptr;
    std::string post = "none";
    if (n->output()->uses().size() == 1) {
      Node* u = n->output()->uses()[0].user;
      const FamilyInfo f = layoutFamily(u);
      if (in.count(u) && u->input(0) == n->output() && !f.fusible.empty()) {
        act = u;
        post = f.fusible;
      }
    }
    c10::IValue packed = pack(n, post);
    if (packed.isNone())
      continue;
    Value* cv = topConstant(g, packed);
    Node* run = place(g.create(sym(packed_kind), {n->input(0), cv}), n, n);
    run->output()->setType(n->output()->type());
    run->output()->copyMetadata(n->output());
    replaceNode(n, run, r.nodes);
    ++e.packed;
    if (act) {
      dropNode(act, run->output(), r.nodes);
      ++e.fused;
    }
  }
}

c10::IValue packedConv(const Node* conv, const std::string& post) {
  auto p = convParams(conv);
  if (!p)
    return {};
  return c10::make_intrusive<runtime::PackedConv>(p->weight, p->bias, p->stride, p->padding,
                                                  p->dilation, p->groups, post);
}

void packConvs(torch::jit::Graph& g, LayoutRegion& r, RegionEdit& e) {
  packOps(g, r, e, "aten::conv2d", "xalloc::conv2d_packed", packedConv);
  packOps(g, r, e, "aten::conv3d", "xalloc::conv3d_packed", packedConv);
}

const char* packedConvKind(const Node* conv, bool add) {
  if (conv->kind() == c10::aten::conv3d)
    return add ? "xalloc::conv3d_packed_add" : "xalloc::conv3d_packed";
  return add ? "xalloc::conv2d_packed_add" : "xalloc::conv2d_packed";
}

bool isPackedConv(const Node* n) {
  const c10::Symbol k = n->kind();
  return k == sym("xalloc::conv2d_packed") || k == sym("xalloc::conv2d_packed_add") ||
         k == sym("xalloc::conv3d_packed") || k == sym("xalloc::conv3d_packed_add");
}

void poolWithoutIndices(torch::jit::Graph& g, LayoutRegion& r, RegionEdit& e) {
  const std::vector<Node*> nodes = r.nodes; // replaceNode edits r.nodes
  for (Node* n : nodes) {
    if (n->kind() != c10::aten::max_pool2d)
      continue;
    Node* m = place(g.create(sym("xalloc::max_pool2d"), n->inputs()), n, n);
    m->output()->setType(n->output()->type());
    m->output()->copyMetadata(n->output());
    replaceNode(n, m, r.nodes);
    ++e.pools;
  }
}

void relayWeights(torch::jit::Graph& g, LayoutRegion& r, c10::MemoryFormat mf, RegionEdit& e) {
  for (Node* n : r.nodes) {
    if (layoutFamily(n).family != LayoutFamily::Conv)
      continue;
    auto w = constantTensor(n->input(1));
    if (!w || w->is_contiguous(mf))
      continue;
    Value* c = topConstant(g, w->contiguous(mf));
    c->setDebugName(n->input(1)->debugName() + "_cl");
    n->replaceInput(1, c);
    ++e.weights_relaid;
  }
}

void convertExits(LayoutRegion& r, Converter& conv, const std::function<Node*(Value*)>& make,
                  RegionEdit& e) {
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  for (Value* x : regionExits(r)) {
    const auto uses = x->uses();
    for (const auto& u : uses) {
      if (in.count(u.user) || readsMetadataOnly(u.user))
        continue;
      Value* y = conv.convert(x, u.user, "exit", make);
      u.user->replaceInput(u.offset, y);
    }
  }
  e.exit_conversions = conv.count();
}

RegionEdit applyChannelsLast(torch::jit::Graph& g, LayoutRegion& r, c10::MemoryFormat mf,
                             const std::function<void(RegionEdit&)>& between) {
  RegionEdit e;
  // Entries: each converted once, before the first region op that reads it (entries are never
  // written in the region: findLayoutRegions keeps in-place ops of outside values out).
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  for (Value* v : regionEntries(r)) {
    Node* first = nullptr;
    for (const auto& u : v->uses())
      if (in.count(u.user) && (!first || u.user->isBefore(first)))
        first = u.user;
    // An entry made row-major by an aten::contiguous only the region reads (a channels-last
    // value turned back into NCHW before a convolution): the entry converts that conversion's
    // source instead, and the round trip goes (no copy at all when the source is channels-last).
    Node* made = v->node();
    const bool round_trip =
        isRowMajorContiguousCall(made) &&
        std::all_of(v->uses().begin(), v->uses().end(),
                    [&](const torch::jit::Use& u) { return in.count(u.user) > 0; });
    Node* cn = place(contiguousNode(g, round_trip ? made->input(0) : v, mf), first, first);
    for (const auto& u : v->uses())
      if (in.count(u.user))
        u.user->replaceInput(u.offset, cn->output());
    if (round_trip && !v->hasUses()) {
      made->destroy();
      ++e.removed_conversions;
    }
    ++e.entry_conversions;
  }
  if (between)
    between(e);
  relayWeights(g, r, mf, e);
  const std::vector<Node*> writers = inPlaceWriters(r);
  Converter exits(writers, r.nodes.front()->owningBlock());
  convertExits(
      r, exits, [&](Value* v) { return contiguousNode(g, v, c10::MemoryFormat::Contiguous); }, e);
  e.applied = true;
  return e;
}

bool entriesConvertedTo(const LayoutRegion& r, c10::MemoryFormat mf) {
  const auto entries = regionEntries(r);
  if (entries.empty())
    return false;
  for (const Value* v : entries) {
    const Node* p = v->node();
    if (p->kind() != c10::aten::contiguous || p->inputs().size() < 2)
      return false;
    auto fmt = torch::jit::toIValue(p->input(1));
    if (!fmt || !fmt->isInt() || fmt->toInt() != static_cast<std::int64_t>(mf))
      return false;
  }
  return true;
}

bool weightLaidOutIn(const Node* now, const std::string& was, c10::MemoryFormat mf) {
  if ((was != "aten::conv2d" && was != "aten::conv3d") || now->kind().toQualString() != was)
    return false;
  auto w = constantTensor(now->input(1));
  return w && !w->is_contiguous() && w->is_contiguous(mf);
}

} // namespace xalloc::tspass::layouts
