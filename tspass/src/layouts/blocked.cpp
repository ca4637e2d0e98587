// Blocked (oneDNN's nChw8c/16c and nCdhw16c, MKLDNN tensors): the ops libtorch 1.13 computes on
// MKLDNN tensors swapped for their MKLDNN forms, as its frozen-ops-to-MKLDNN pass does, convolution
// weights blocked once as constants that survive saving (xalloc::mkldnn_constant), the other ops
// of the region reading dense copies. Entries go through xalloc::to_blocked, which refuses an
// input that wants gradients.
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include <torch/csrc/jit/ir/constants.h>

#include "edit.h"
#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/layout_families.h"
#include "xalloc/tspass/region_layouts.h"

namespace xalloc::tspass {

namespace {

using namespace layouts;

RegionEdit applyBlocked(torch::jit::Graph& g, LayoutRegion& r) {
  RegionEdit e;
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
    } else if (k.rfind("aten::upsample_", 0) == 0) { // brought back to full size
      out = false;
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
      if (u.user != n && topLevel(u.user, r.nodes.front()->owningBlock())->isAfter(n)) {
        e.message = "an in-place op would write a converted copy of a value read after it";
        return e;
      }
  }
  const std::vector<Node*> writers = inPlaceWriters(r);
  const torch::jit::Block* top = r.nodes.front()->owningBlock(); // the region's block
  Converter to_mkldnn(writers, top), to_dense(writers, top);
  Value* none = topConstant(g, c10::IValue());
  // Entries go through xalloc::to_blocked: aten::to_mkldnn that refuses, in one line, an input
  // that wants gradients (MKLDNN ops compute none; the output would come back detached).
  auto makeMkldnn = [&](Value* v) {
    Node* n = g.create(sym("xalloc::to_blocked"), {v});
    n->output()->setType(v->type());
    return n;
  };
  auto makeDense = [&](Value* v) {
    Node* n = g.create(sym("aten::to_dense"), {v, none, none}); // dtype, masked_grad
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
    if (k == "aten::conv2d" || k == "aten::conv3d") { // nChw16c, nCdhw16c alike
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
    // The runtime's forms where libtorch's MKLDNN ones are wrong (op_facts.h: blocked_form).
    const formats::OpFacts* facts = formats::opFacts(k);
    const std::string form =
        facts && *facts->blocked_form
            ? facts->blocked_form + std::string(formats::isInPlaceKind(k) ? "_" : "")
            : "";
    if (!form.empty()) {
      const bool unary = layoutFamily(n).family == LayoutFamily::Unary;
      Node* m = place(
          g.create(sym(form.c_str()), unary ? at::ArrayRef<Value*>{n->input(0)} : n->inputs()), n,
          n);
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
            if (u.user != b && !topLevel(u.user, top)->isBefore(n))
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

class Blocked final : public RegionLayout {
public:
  Blocked() : RegionLayout("blocked") {}
  RegionEdit apply(torch::jit::Graph& g, LayoutRegion& r) const override {
    return applyBlocked(g, r);
  }
  bool appliedAt(const torch::jit::Node* now, const std::string&) const override {
    return now->kind() == sym("prim::mkldnn_convolution");
  }
};

} // namespace

const RegionLayout& blockedLayout() {
  static const Blocked layout;
  return layout;
}

} // namespace xalloc::tspass
