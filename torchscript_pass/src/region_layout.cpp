// Rewriting one region to run in another layout: conversions at its entries and exits, weights
// re-laid once as constants (channels-last, packed for oneDNN with the next activation fused, or
// blocked MKLDNN constants that survive saving), and for the blocked layout the ops libtorch 1.13
// computes on MKLDNN tensors swapped for their MKLDNN forms, as its frozen-ops-to-MKLDNN pass
// does, with dense copies for the others.
#include <algorithm>
#include <functional>
#include <map>
#include <unordered_set>

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/layout_families.h"
#include "xalloc/tspass/regions.h"
#include "xalloc/tspass/rewrite.h"

namespace xalloc::tspass {

using formats::LayoutTarget;
using torch::jit::Node;
using torch::jit::Value;

namespace {

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

// Conversions of values for their users, shared by the users that come after one conversion
// unless something in between writes the value in place (it would then read a stale copy).
class Converter {
public:
  Converter(torch::jit::Graph& g, const std::vector<Node*>& writers) : g_(g), writers_(writers) {}

  // `make(v, before)` creates (unplaced) the conversion node of v; it is placed before `user`'s
  // top-level node. Returns the converted value.
  template <class Make> Value* convert(Value* v, Node* user, const std::string& key, Make make) {
    Node* at = topLevel(user, g_.block());
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
  std::int64_t count() const { return count_; }

private:
  bool writtenBetween(const Value* v, const Node* from, const Node* to) const {
    for (const Node* w : writers_)
      if (isInPlaceWriteOf(w, v) && from->isBefore(w) && w->isBefore(to))
        return true;
    return false;
  }
  torch::jit::Graph& g_;
  const std::vector<Node*>& writers_;
  std::map<std::pair<const Value*, std::string>, std::vector<Node*>> made_;
  std::int64_t count_ = 0;
};

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

// The convolution's weight, bias (none: undefined) and parameters when all are constants.
struct ConvParams {
  at::Tensor weight;
  c10::optional<at::Tensor> bias;
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups = 1;
};
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
  nodes.erase(std::remove(nodes.begin(), nodes.end(), n), nodes.end());
  n->destroy();
}

// Packs each convolution of the region (weights constant) into xalloc::conv2d_packed, fusing
// the activation that is its only reader.
void packConvolutions(torch::jit::Graph& g, LayoutRegion& r, RegionEdit& e) {
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  for (Node* n : std::vector<Node*>(r.nodes)) {
    if (n->kind() != sym("aten::conv2d"))
      continue;
    auto p = convParams(n);
    if (!p)
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
    auto ctx = c10::make_intrusive<runtime::PackedConv>(p->weight, p->bias, p->stride, p->padding,
                                                        p->dilation, p->groups, post);
    Value* cv = topConstant(g, c10::IValue(std::move(ctx)));
    Node* run = place(g.create(sym("xalloc::conv2d_packed"), {n->input(0), cv}), n, n);
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

// Packs each linear of the region (a constant weight) into xalloc::linear_packed, fusing the
// activation that is its only reader.
void packLinears(torch::jit::Graph& g, LayoutRegion& r, RegionEdit& e) {
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  for (Node* n : std::vector<Node*>(r.nodes)) {
    if (n->kind() != sym("aten::linear"))
      continue;
    auto w = constantTensor(n->input(1));
    c10::optional<at::Tensor> b;
    if (n->input(2)->type()->kind() != c10::TypeKind::NoneType) {
      auto bt = constantTensor(n->input(2));
      if (!bt)
        continue;
      b = *bt;
    }
    if (!w)
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
    Value* cv =
        topConstant(g, c10::IValue(c10::make_intrusive<runtime::PackedLinear>(*w, b, post)));
    Node* run = place(g.create(sym("xalloc::linear_packed"), {n->input(0), cv}), n, n);
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

// Re-lays each constant convolution weight in the memory format the region runs in.
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

// The region's exits, converted back to row-major for every reader outside it.
void convertExits(torch::jit::Graph& g, LayoutRegion& r, Converter& conv,
                  const std::function<Node*(Value*)>& make, RegionEdit& e) {
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
  (void)g;
  e.exit_conversions = conv.count();
}

RegionEdit applyChannelsLast(torch::jit::Graph& g, LayoutRegion& r,
                             const formats::RegionCandidate& c) {
  RegionEdit e;
  const auto mf = r.rank == 5 ? c10::MemoryFormat::ChannelsLast3d : c10::MemoryFormat::ChannelsLast;
  if (c.packed && !runtime::hasPackedConv()) {
    e.message = "this runtime was built without oneDNN: no packed convolutions";
    return e;
  }
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
  if (c.packed)
    packConvolutions(g, r, e);
  relayWeights(g, r, mf, e);
  std::vector<Node*> writers;
  for (Node* n : r.nodes)
    if (layoutFamily(n).in_place)
      writers.push_back(n);
  Converter exits(g, writers);
  convertExits(
      g, r, exits, [&](Value* v) { return contiguousNode(g, v, c10::MemoryFormat::Contiguous); },
      e);
  e.applied = true;
  return e;
}

RegionEdit applyBlocked(torch::jit::Graph& g, LayoutRegion& r) {
  RegionEdit e;
  if (r.rank != 4) {
    e.message = "blocked regions are 4-D";
    return e;
  }
  // Which ops compute on MKLDNN tensors: convolutions with constant weights, and the ops
  // libtorch's pass takes; the rest of the region reads dense copies.
  // A value made from a global pooling (a squeeze-and-excitation scale, 1x1 spatially, through
  // the convolutions and activations after it): multiplied into a
  // full-size MKLDNN tensor, it is expanded and laid out anew, and libtorch 1.13's MKLDNN
  // binary ops on two layouts take a slow path (100 ms for one scale at batch 8): such a product
  // is computed dense.
  std::unordered_map<const Value*, bool> reduced;
  std::function<bool(Value*)> pooled = [&](Value* v) {
    if (auto it = reduced.find(v); it != reduced.end())
      return it->second;
    reduced[v] = false;
    Node* p = v->node();
    bool out = false;
    const std::string k = p->kind().toQualString();
    const LayoutFamily f = layoutFamily(p).family;
    if (k == "aten::adaptive_avg_pool2d" || k == "aten::mean") {
      out = true;
    } else if (f == LayoutFamily::Binary) { // as large as its largest operand
      out = true;
      for (std::size_t i : activationInputs(p, f))
        out = out && pooled(p->input(i));
    } else if (f != LayoutFamily::None) { // convolutions, activations: the input's extent
      out = pooled(p->input(0));
    }
    return reduced[v] = out;
  };
  std::unordered_set<Node*> mk;
  for (Node* n : r.nodes) {
    const FamilyInfo f = layoutFamily(n);
    if (!f.mkldnn)
      continue;
    if (f.family == LayoutFamily::Conv && !convParams(n))
      continue;
    if (f.family == LayoutFamily::Binary && pooled(n->input(0)) != pooled(n->input(1)))
      continue;
    mk.insert(n);
  }
  bool any_conv = false;
  for (Node* n : mk)
    any_conv |= layoutFamily(n).family == LayoutFamily::Conv;
  if (!any_conv) {
    e.message = "no convolution of the region has constant weights";
    return e;
  }
  // An op that writes its input in place and computes in the other representation writes a
  // converted copy: harmless unless the input is read again after it.
  for (Node* n : r.nodes) {
    if (!layoutFamily(n).in_place)
      continue;
    Value* v = n->input(0);
    if (mk.count(n) == mk.count(v->node()))
      continue;
    for (const auto& u : v->uses())
      if (u.user != n && topLevel(u.user, g.block())->isAfter(n)) {
        e.message = "an in-place op would write a converted copy of a value read after it";
        return e;
      }
  }
  std::vector<Node*> writers;
  for (Node* n : r.nodes)
    if (layoutFamily(n).in_place)
      writers.push_back(n);
  Converter to_mkldnn(g, writers), to_dense(g, writers);
  Value* none = topConstant(g, c10::IValue());
  // Entries go through xalloc::to_blocked: aten::to_mkldnn that refuses, in one line, an input
  // that wants gradients (MKLDNN ops compute none; the output would come back detached).
  auto makeMkldnn = [&](Value* v) {
    Node* n = g.create(sym("xalloc::to_blocked"), {v});
    n->output()->setType(v->type());
    return n;
  };
  auto makeDense = [&](Value* v) {
    Node* n = g.create(sym("aten::to_dense"), {v, none});
    n->output()->setType(v->type());
    return n;
  };
  // Representation of each value: MKLDNN when an MKLDNN op made it.
  auto isMk = [&](Value* v) {
    return mk.count(v->node()) > 0;
  };
  const std::unordered_set<const Node*> in(r.nodes.begin(), r.nodes.end());
  for (Node* n : std::vector<Node*>(r.nodes)) {
    const FamilyInfo f = layoutFamily(n);
    for (std::size_t i : activationInputs(n, f.family)) {
      Value* v = n->input(i);
      if (mk.count(n) && !isMk(v))
        n->replaceInput(i, to_mkldnn.convert(v, n, "mkldnn", makeMkldnn));
      else if (!mk.count(n) && isMk(v))
        n->replaceInput(i, to_dense.convert(v, n, "dense", makeDense));
    }
  }
  // Exits made by MKLDNN ops go back to dense for their readers outside.
  for (Value* x : regionExits(r)) {
    if (!isMk(x))
      continue;
    const auto uses = x->uses();
    for (const auto& u : uses)
      if (!in.count(u.user) && !readsMetadataOnly(u.user))
        u.user->replaceInput(u.offset, to_dense.convert(x, u.user, "dense", makeDense));
  }
  // Then the ops themselves: convolutions with blocked constants, the MKLDNN forms of the
  // activations that have one, broadcasts the MKLDNN way.
  for (Node* n : std::vector<Node*>(r.nodes)) {
    if (!mk.count(n))
      continue;
    const std::string k = n->kind().toQualString();
    if (k == "aten::conv2d") {
      auto p = convParams(n);
      std::vector<std::int64_t> spec = p->padding;
      spec.insert(spec.end(), p->stride.begin(), p->stride.end());
      spec.insert(spec.end(), p->dilation.begin(), p->dilation.end());
      spec.push_back(p->groups);
      auto constant = [&](const at::Tensor& t, std::vector<std::int64_t> conv_spec) {
        Value* c = topConstant(
            g, c10::IValue(c10::make_intrusive<runtime::MkldnnConstant>(t, std::move(conv_spec))));
        Node* get = place(g.create(sym("xalloc::mkldnn_constant"), {c}), n, n);
        get->output()->setType(c10::TensorType::get());
        return get->output();
      };
      Value* w = constant(p->weight, spec);
      Value* b = p->bias ? constant(*p->bias, {}) : n->input(2);
      Node* conv =
          place(g.create(sym("prim::mkldnn_convolution"),
                         {n->input(0), w, b, n->input(3), n->input(4), n->input(5), n->input(6)}),
                n, n);
      conv->output()->setType(n->output()->type());
      mk.erase(n);
      mk.insert(conv);
      replaceNode(n, conv, r.nodes);
      ++e.blocked_ops;
      continue;
    }
    // The runtime's forms: libtorch's MKLDNN relu and max pooling turn NaN into 0 (oneDNN's
    // max), and its out-of-place MKLDNN hard swish, hard sigmoid and relu6 are wrong when the
    // channels are not a multiple of the block (runtime/src/blocked_ops.cpp).
    static const std::map<std::string, std::string> renamed = {
        {"aten::hardswish", "xalloc::blocked_hardswish"},
        {"aten::hardswish_", "xalloc::blocked_hardswish_"},
        {"aten::hardsigmoid", "xalloc::blocked_hardsigmoid"},
        {"aten::hardsigmoid_", "xalloc::blocked_hardsigmoid_"},
        {"aten::relu6", "xalloc::blocked_relu6"},
        {"aten::relu6_", "xalloc::blocked_relu6_"},
        {"aten::relu", "xalloc::blocked_relu"},
        {"aten::relu_", "xalloc::blocked_relu_"},
        {"aten::max_pool2d", "xalloc::blocked_max_pool2d"}};
    if (auto it = renamed.find(k); it != renamed.end()) {
      const bool pool = k == "aten::max_pool2d";
      Node* m = place(
          g.create(sym(it->second.c_str()), pool ? n->inputs() : at::ArrayRef<Value*>{n->input(0)}),
          n, n);
      m->output()->setType(n->output()->type());
      mk.erase(n);
      mk.insert(m);
      replaceNode(n, m, r.nodes);
    } else if (layoutFamily(n).family == LayoutFamily::Binary) {
      Value* a = n->input(0);
      Value* c = n->input(1);
      Node* b = place(g.create(sym("xalloc::broadcast_mkldnn"), {a, c}, 2), n, n);
      b->output(0)->setType(a->type());
      b->output(1)->setType(c->type());
      n->replaceInput(0, b->output(0));
      n->replaceInput(1, b->output(1));
      // Out of place, an MKLDNN mul takes libtorch 1.13's slow path (50 ms where the in-place
      // one takes 1 at batch 8): write into an operand no one reads after it, as libtorch's own
      // pass does (InplaceMKLDNNSubgraph). Tensor-tensor add and mul (alpha 1) commute.
      if (!layoutFamily(n).in_place) {
        auto deadAfter = [&](Value* v) {
          if (!mk.count(v->node()) && v->node()->kind() != sym("xalloc::to_blocked"))
            return false; // not a tensor of the region's own making
          for (const auto& u : v->uses())
            if (u.user != b && !topLevel(u.user, g.block())->isBefore(n))
              return false;
          return true;
        };
        const bool first = deadAfter(a), second = !first && deadAfter(c);
        if (first || second) {
          if (second) {
            n->replaceInput(0, b->output(1));
            n->replaceInput(1, b->output(0));
          }
          const std::string inplace = k + "_";
          Node* m = g.create(sym(inplace.c_str()), n->inputs());
          place(m, n, n);
          m->output()->setType(n->output()->type());
          mk.erase(n);
          mk.insert(m);
          replaceNode(n, m, r.nodes);
        }
      }
    }
    ++e.blocked_ops;
  }
  e.entry_conversions = to_mkldnn.count();
  e.exit_conversions = to_dense.count();
  e.applied = true;
  return e;
}

} // namespace

RegionEdit applyRegionLayout(torch::jit::Graph& graph, LayoutRegion& r,
                             const formats::RegionCandidate& c) {
  RegionEdit e;
  switch (c.target) {
  case LayoutTarget::Contiguous:
    if (!c.packed || r.rank != 0) {
      e.message = "left as it is";
      return e;
    }
    if (!runtime::hasPackedConv()) {
      e.message = "this runtime was built without oneDNN: no packed linears";
      return e;
    }
    packLinears(graph, r, e);
    e.applied = e.packed > 0;
    if (!e.applied)
      e.message = "no linear with a constant weight";
    return e;
  case LayoutTarget::ChannelsLast:
  case LayoutTarget::ChannelsLast3d:
    if ((c.target == LayoutTarget::ChannelsLast) != (r.rank == 4)) {
      e.message = std::string(formats::toString(c.target)) + " does not fit a " +
                  std::to_string(r.rank) + "-D region";
      return e;
    }
    return applyChannelsLast(graph, r, c);
  case LayoutTarget::Blocked:
    return applyBlocked(graph, r);
  }
  return e;
}

bool regionReadsChannelsLast(const LayoutRegion& r) {
  const auto entries = regionEntries(r);
  if (entries.empty())
    return false;
  for (const Value* v : entries) {
    const Node* p = v->node();
    if (p->kind() != c10::aten::contiguous || p->inputs().size() < 2)
      return false;
    auto fmt = torch::jit::toIValue(p->input(1));
    if (!fmt || !fmt->isInt() ||
        (fmt->toInt() != static_cast<std::int64_t>(c10::MemoryFormat::ChannelsLast) &&
         fmt->toInt() != static_cast<std::int64_t>(c10::MemoryFormat::ChannelsLast3d)))
      return false;
  }
  return true;
}

bool regionAlreadyLaidOut(const GraphIndex& index, const formats::RegionRef& ref) {
  for (const auto& a : ref.nodes) {
    if (a.op != "aten::conv2d" && a.op != "aten::conv3d" && a.op != "aten::linear")
      continue;
    for (std::size_t i = 0; i < index.ops().size(); ++i) {
      const auto& b = index.anchor(static_cast<std::int64_t>(i));
      if (b.file != a.file || b.function != a.function || b.expr != a.expr || b.line != a.line ||
          b.col != a.col)
        continue;
      const Node* n = index.ops()[i];
      if (b.op == "xalloc::conv2d_packed" || b.op == "prim::mkldnn_convolution" ||
          b.op == "xalloc::linear_packed")
        return true;
      if (b.op == a.op && a.op != "aten::linear") {
        auto w = constantTensor(n->input(1));
        if (w && !w->is_contiguous() &&
            (w->is_contiguous(c10::MemoryFormat::ChannelsLast) ||
             w->is_contiguous(c10::MemoryFormat::ChannelsLast3d)))
          return true;
      }
    }
  }
  return false;
}

} // namespace xalloc::tspass
