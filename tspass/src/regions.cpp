// Finding layout regions (ranks propagated through the graph, ops of a layout family joined
// through the tensors they pass each other), naming them by anchors, and taking one out as a
// graph of its own.
#include "xalloc/tspass/regions.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <unordered_set>

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include "ranks.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/layout_families.h"

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

// The top-level node of the graph that `n` sits in (itself, or the block owner above it).
Node* topLevel(Node* n, const torch::jit::Block* top) {
  while (n && n->owningBlock() != top) {
    Node* owner = n->owningBlock()->owningNode();
    if (!owner)
      return n; // the return node of the top block
    n = owner;
  }
  return n;
}

// A linear whose weight is a constant 2-D float tensor, its bias a constant or none.
bool isConstantWeight(const Node* n) {
  auto w = n->inputs().size() == 3 ? torch::jit::toIValue(n->input(1)) : c10::nullopt;
  if (!w || !w->isTensor() || w->toTensor().dim() != 2 || w->toTensor().scalar_type() != at::kFloat)
    return false;
  if (n->input(2)->type()->kind() == c10::TypeKind::NoneType)
    return true;
  auto b = torch::jit::toIValue(n->input(2));
  return b && b->isTensor() && b->toTensor().scalar_type() == at::kFloat;
}

// None, or an element of a constant tuple that is None (torch 2.x's nn.MultiheadAttention takes
// its mask from merge_masks(None, None, ...), which freezing folds to a constant (None, None)
// that a prim::TupleUnpack of type Tensor? still reads).
bool isNone(const Value* v) {
  if (v->type()->kind() == c10::TypeKind::NoneType)
    return true;
  const Node* n = v->node();
  if (n->kind() != c10::prim::TupleUnpack)
    return false;
  const auto tuple = torch::jit::toIValue(n->input(0));
  if (!tuple || !tuple->isTuple())
    return false;
  const auto& elements = tuple->toTupleRef().elements();
  for (std::size_t i = 0; i < n->outputs().size(); ++i)
    if (n->output(i) == v)
      return i < elements.size() && elements[i].isNone();
  return false;
}

bool constantIs(const Value* v, bool want) {
  auto iv = torch::jit::toIValue(v);
  return iv && iv->isBool() && iv->toBool() == want;
}

// nn.MultiheadAttention's fast path (aten::_native_multi_head_attention) as the runtime's packed
// attention runs it: one value as query, key and value, constant sizes and float weights, no
// mask, no attention weights wanted (its second output is then always undefined).
bool isPackableAttention(const Node* n) {
  if (!hasKind(n, "aten::_native_multi_head_attention") || n->inputs().size() != 13 ||
      n->input(0) != n->input(1) || n->input(0) != n->input(2))
    return false;
  auto e = constantInt(n->input(3)), h = constantInt(n->input(4));
  if (!e || !h || *e < 1 || *h < 1 || *e % *h != 0)
    return false;
  for (std::size_t i = 5; i < 9; ++i) {
    auto t = torch::jit::toIValue(n->input(i));
    if (!t || !t->isTensor() || t->toTensor().scalar_type() != at::kFloat)
      return false;
  }
  return isNone(n->input(9)) && constantIs(n->input(10), false);
}

bool isConstantList(const Value* v) {
  if (v->node()->kind() != c10::prim::ListConstruct)
    return false;
  for (const Value* e : v->node()->inputs())
    if (e->node()->kind() != c10::prim::Constant)
      return false;
  return true;
}

struct UnionFind {
  explicit UnionFind(std::size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  std::size_t find(std::size_t x) {
    while (parent[x] != x)
      x = parent[x] = parent[parent[x]];
    return x;
  }
  void join(std::size_t a, std::size_t b) { parent[find(a)] = find(b); }
  std::vector<std::size_t> parent;
};

bool convex(const LayoutRegion& r) {
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  const torch::jit::Block* top = r.nodes.front()->owningBlock(); // the region's block
  // Walk forward from the region through nodes outside it; reaching it again is a cycle.
  std::vector<Node*> work;
  std::unordered_set<const Node*> seen;
  // A path through a metadata read (aten::size: a segmenter resizing to its input's size) is
  // no data path: the size is the same in every layout, and the region still runs as a whole.
  auto pushUsers = [&](const Node* n) {
    for (const Value* o : n->outputs())
      for (const auto& u : o->uses()) {
        if (readsMetadataOnly(u.user))
          continue;
        Node* t = topLevel(u.user, top);
        if (t && seen.insert(t).second)
          work.push_back(t);
      }
  };
  for (const Node* n : r.nodes)
    pushUsers(n);
  while (!work.empty()) {
    Node* n = work.back();
    work.pop_back();
    if (in.count(n)) {
      // A region node reached from another: fine unless the path went outside. Nodes pushed
      // straight from the region are its own users; only those reached through outside nodes
      // matter, and those are never pushed from region nodes below.
      continue;
    }
    if (n->kind() == c10::prim::Return)
      continue;
    for (const Value* o : n->outputs())
      for (const auto& u : o->uses()) {
        Node* t = topLevel(u.user, top);
        if (!t)
          continue;
        if (in.count(t))
          return false;
        if (seen.insert(t).second)
          work.push_back(t);
      }
  }
  return true;
}

} // namespace

std::vector<Value*> regionEntries(const LayoutRegion& r) {
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  std::vector<Value*> out;
  std::unordered_set<const Value*> seen;
  for (Node* n : r.nodes) {
    const FamilyInfo f = layoutFamily(n);
    for (std::size_t i : activationInputs(n, f.family)) {
      Value* v = n->input(i);
      if (in.count(v->node()) || v->node()->kind() == c10::prim::Constant || !seen.insert(v).second)
        continue;
      out.push_back(v);
    }
  }
  return out;
}

std::vector<Value*> regionExits(const LayoutRegion& r) {
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  std::vector<Value*> out;
  for (Node* n : r.nodes)
    for (Value* o : n->outputs())
      for (const auto& u : o->uses()) {
        if (o->offset() == 1 && isPackableAttention(n))
          break; // the attention weights, never asked for: always undefined
        if (!in.count(u.user) && !readsMetadataOnly(u.user)) {
          out.push_back(o);
          break;
        }
      }
  return out;
}

std::vector<LayoutRegion> findLayoutRegions(torch::jit::Graph& graph,
                                            const std::vector<std::optional<int>>& input_ranks) {
  const Ranks ranks(graph, input_ranks);
  // Candidate ops: of a layout family, making a 4-D or 5-D tensor from inputs of known rank.
  std::vector<Node*> cand;
  std::unordered_map<const Node*, int> rank_of;
  for (Node* n : allNodes(graph)) { // in loops and branches too: a detector's head per level
    const FamilyInfo f = layoutFamily(n);
    if (f.family == LayoutFamily::None || f.family == LayoutFamily::Linear)
      continue;
    auto r = ranks.of(n->output());
    if (!r || (*r != 4 && *r != 5))
      continue;
    if (f.family == LayoutFamily::Conv) {
      const bool is3d = n->kind() == c10::Symbol::fromQualString("aten::conv3d");
      if (*r != (is3d ? 5 : 4))
        continue;
    }
    cand.push_back(n);
    rank_of[n] = *r;
  }
  // Join ops through the tensors of the region's rank they pass each other; an op that writes
  // its input in place belongs only where that input is made in the same region (written after
  // a conversion, it would write the copy). Dropping one can split a region: repeat until none.
  std::vector<std::vector<Node*>> groups;
  for (bool changed = true; changed;) {
    changed = false;
    std::unordered_map<const Node*, std::size_t> idx;
    for (std::size_t i = 0; i < cand.size(); ++i)
      idx[cand[i]] = i;
    UnionFind uf(cand.size());
    for (std::size_t i = 0; i < cand.size(); ++i) {
      Node* n = cand[i];
      for (std::size_t a : activationInputs(n, layoutFamily(n).family)) {
        // Within one block: a region runs as a whole, its conversions at its own edges.
        auto it = idx.find(n->input(a)->node());
        if (it != idx.end() && rank_of[it->first] == rank_of[n] &&
            it->first->owningBlock() == n->owningBlock())
          uf.join(i, it->second);
      }
    }
    std::vector<Node*> keep;
    for (std::size_t i = 0; i < cand.size(); ++i) {
      Node* n = cand[i];
      if (layoutFamily(n).in_place) {
        auto it = idx.find(n->input(0)->node());
        if (it == idx.end() || it->first->owningBlock() != n->owningBlock() ||
            uf.find(it->second) != uf.find(i)) {
          changed = true;
          continue;
        }
      }
      keep.push_back(n);
    }
    if (changed) {
      cand = std::move(keep);
      continue;
    }
    std::map<std::size_t, std::vector<Node*>> by_root;
    for (std::size_t i = 0; i < cand.size(); ++i)
      by_root[uf.find(i)].push_back(cand[i]);
    for (auto& [root, nodes] : by_root)
      groups.push_back(std::move(nodes));
  }
  std::vector<LayoutRegion> out;
  for (auto& nodes : groups) {
    std::sort(nodes.begin(), nodes.end(), [](Node* a, Node* b) { return a->isBefore(b); });
    LayoutRegion r;
    r.nodes = nodes;
    r.rank = rank_of[nodes.front()];
    for (Node* n : nodes)
      r.convolutions += layoutFamily(n).family == LayoutFamily::Conv;
    if (r.convolutions == 0)
      continue; // a region pays for its conversions with its convolutions

    r.convex = convex(r);
    out.push_back(std::move(r));
  }
  // Each linear with a constant float weight (and bias), with the activation that is its only
  // reader when a packed linear can fuse it.
  for (Node* n : graph.nodes()) {
    if (layoutFamily(n).family != LayoutFamily::Linear || !isConstantWeight(n))
      continue;
    LayoutRegion r;
    r.rank = 0;
    r.nodes = {n};
    if (n->output()->uses().size() == 1) {
      Node* u = n->output()->uses()[0].user;
      const FamilyInfo f = layoutFamily(u);
      if (u->owningBlock() == graph.block() && f.family == LayoutFamily::Unary &&
          !f.fusible.empty() && u->input(0) == n->output())
        r.nodes.push_back(u);
    }
    out.push_back(std::move(r));
  }
  // Each self-attention block (in any block: nn.MultiheadAttention's fast path sits in the
  // branches of its checks) as a region of its own.
  for (Node* n : allNodes(graph))
    if (isPackableAttention(n)) {
      LayoutRegion r;
      r.rank = 0;
      r.nodes = {n};
      out.push_back(std::move(r));
    }
  std::sort(out.begin(), out.end(), [](const LayoutRegion& a, const LayoutRegion& b) {
    return a.nodes.front()->isBefore(b.nodes.front());
  });
  return out;
}

std::vector<std::vector<std::pair<std::size_t, std::size_t>>>
regionBorders(const std::vector<LayoutRegion>& regions) {
  std::unordered_map<const Node*, std::size_t> region_of;
  for (std::size_t i = 0; i < regions.size(); ++i)
    for (const Node* n : regions[i].nodes)
      region_of.emplace(n, i);
  // Ops that hand on a value's elements with no computation of their own: parts of channels,
  // a row-major copy (the round trip a rewrite drops), the channel shuffle's views and transpose
  // (a rewrite makes them one xalloc::channel_shuffle of the channels-last value).
  auto carries = [](const Node* n) {
    static const char* const kinds[] = {"prim::ListUnpack", "aten::chunk",
                                        "aten::split",      "aten::split_with_sizes",
                                        "aten::contiguous", "aten::view",
                                        "aten::reshape",    "aten::transpose",
                                        "aten::narrow",     "xalloc::channel_shuffle"};
    return std::any_of(std::begin(kinds), std::end(kinds),
                       [&](const char* k) { return hasKind(n, k); });
  };
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> out(regions.size());
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const auto exits = regionExits(regions[i]);
    for (std::size_t k = 0; k < exits.size(); ++k) {
      std::set<std::size_t> reached;
      std::vector<const Value*> work{exits[k]};
      std::unordered_set<const Value*> seen{exits[k]};
      bool escapes = false; // read by an op of no region too (or returned): converted anyway
      while (!work.empty() && !escapes) {
        const Value* v = work.back();
        work.pop_back();
        for (const auto& u : v->uses()) {
          auto it = region_of.find(u.user);
          if (it != region_of.end()) {
            if (it->second != i)
              reached.insert(it->second);
            continue;
          }
          // A size read is no data path; any other op outside the regions reads the value
          // row-major, so its conversion stays and no border is shared.
          if (readsMetadataOnly(u.user))
            continue;
          if (!carries(u.user)) {
            escapes = true;
            break;
          }
          for (const Value* o : u.user->outputs())
            if (seen.insert(o).second)
              work.push_back(o);
        }
      }
      if (!escapes)
        for (std::size_t j : reached)
          out[i].emplace_back(k, j);
    }
  }
  return out;
}

formats::RegionRef regionRef(const LayoutRegion& r, const GraphIndex& index, std::int64_t id) {
  formats::RegionRef ref;
  ref.id = id;
  ref.convolutions = r.convolutions;
  for (const Node* n : r.nodes)
    ref.nodes.push_back(index.anchor(index.opId(n)));
  return ref;
}

bool sameRegion(const LayoutRegion& r, const GraphIndex& index, const formats::RegionRef& ref) {
  if (r.nodes.size() != ref.nodes.size())
    return false;
  for (std::size_t i = 0; i < r.nodes.size(); ++i) {
    const auto id = index.opId(r.nodes[i]);
    if (id < 0 || !index.anchor(id).sameSite(ref.nodes[i]))
      return false;
  }
  return true;
}

ExtractedRegion extractRegion(const LayoutRegion& r) {
  ExtractedRegion x;
  x.graph = std::make_shared<torch::jit::Graph>();
  torch::jit::Graph& g = *x.graph;
  std::unordered_map<Value*, Value*> map;
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  // Inputs: the entries first, then whatever else the region reads from outside that is not a
  // constant (a size computed at run time, a tensor of another rank).
  for (Value* v : regionEntries(r)) {
    map[v] = g.addInput()->copyMetadata(v);
    x.inputs.push_back(v);
  }
  for (Node* n : r.nodes)
    for (Value* v : n->inputs()) {
      if (map.count(v) || in.count(v->node()))
        continue;
      if (v->node()->kind() == c10::prim::Constant) {
        Node* c = g.createClone(v->node(), [](Value*) -> Value* { return nullptr; });
        g.appendNode(c);
        map[v] = c->output();
        continue;
      }
      if (isConstantList(v)) { // [1, 1] as a saved graph spells it: a list of constants
        for (Value* e : v->node()->inputs())
          if (!map.count(e)) {
            Node* c = g.createClone(e->node(), [](Value*) -> Value* { return nullptr; });
            g.appendNode(c);
            map[e] = c->output();
          }
        Node* c = g.createClone(v->node(), [&](Value* e) { return map.at(e); });
        g.appendNode(c);
        map[v] = c->output();
        continue;
      }
      map[v] = g.addInput()->copyMetadata(v);
      x.inputs.push_back(v);
    }
  for (Node* n : r.nodes) {
    Node* c = g.createClone(n, [&](Value* v) { return map.at(v); });
    g.appendNode(c);
    for (std::size_t i = 0; i < n->outputs().size(); ++i)
      map[n->output(i)] = c->output(i);
    x.region.nodes.push_back(c);
  }
  x.region.rank = r.rank;
  x.region.convolutions = r.convolutions;
  // One output (a function returns one value): the exit, or a tuple of them.
  std::vector<Value*> outs;
  for (Value* v : regionExits(r)) {
    outs.push_back(map.at(v));
    x.outputs.push_back(v);
  }
  if (outs.size() == 1)
    g.registerOutput(outs[0]);
  else
    g.registerOutput(g.insertNode(g.createTuple(outs))->output());
  return x;
}

std::string whyNoRegion(torch::jit::Graph& graph) {
  std::size_t convs = 0, string_padding = 0;
  for (Node* n : allNodes(graph)) {
    const std::string k = n->kind().toQualString();
    if (k != "aten::conv2d" && k != "aten::conv3d")
      continue;
    if (layoutFamily(n).family != LayoutFamily::Conv)
      ++string_padding;
    else
      ++convs;
  }
  const std::string head = "no layout region: ";
  if (convs + string_padding == 0)
    return head + "the model has no 2-D or 3-D convolution, and no linear or attention block "
                  "with constant weights";
  if (convs == 0)
    return head + "its convolutions take padding as a string ('same'), computed at run time";
  return head + "no convolution of the " + std::to_string(convs) +
         " reads a tensor whose rank is known here (its input's rank follows neither from the "
         "model's inputs nor from a constant weight)";
}

std::vector<std::optional<int>> inputRanks(const std::vector<c10::IValue>& inputs) {
  std::vector<std::optional<int>> out;
  for (const auto& v : inputs)
    out.push_back(v.isTensor() ? std::optional<int>(static_cast<int>(v.toTensor().dim()))
                               : std::nullopt);
  return out;
}

} // namespace xalloc::tspass
