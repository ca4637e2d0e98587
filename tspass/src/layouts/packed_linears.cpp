// Packed linears: a linear with a constant weight (a region of its own, row-major activations)
// becomes the runtime's xalloc::linear_packed, the activation that is its only reader fused; a
// self-attention block with constant projections becomes xalloc::attention_packed.
#include "edit.h"
#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/region_layouts.h"

namespace xalloc::tspass {

namespace {

// Each aten::_native_multi_head_attention of the region (findLayoutRegions took only those the
// runtime's attention runs) becomes xalloc::attention_packed, its projections packed.
void packAttention(torch::jit::Graph& g, LayoutRegion& r, RegionEdit& e) {
  for (torch::jit::Node*& n : r.nodes) {
    if (n->kind() != layouts::sym("aten::_native_multi_head_attention"))
      continue;
    auto e_dim = torch::jit::toIValue(n->input(3)), heads = torch::jit::toIValue(n->input(4));
    std::vector<at::Tensor> w;
    for (std::size_t i = 5; i < 9; ++i)
      if (auto t = layouts::constantTensor(n->input(i)))
        w.push_back(*t);
    if (!e_dim || !heads || !e_dim->isInt() || !heads->isInt() || w.size() != 4)
      continue;
    torch::jit::Value* a =
        layouts::topConstant(g, c10::make_intrusive<runtime::PackedAttention>(
                                    e_dim->toInt(), heads->toInt(), w[0], w[1], w[2], w[3]));
    torch::jit::Node* run = g.create(layouts::sym("xalloc::attention_packed"),
                                     {n->input(0), n->input(1), n->input(2), a, n->input(9),
                                      n->input(10), n->input(11), n->input(12)},
                                     2);
    layouts::place(run, n, n);
    for (std::size_t i = 0; i < 2; ++i) {
      run->output(i)->setType(n->output(i)->type());
      run->output(i)->copyMetadata(n->output(i));
      n->output(i)->replaceAllUsesWith(run->output(i));
    }
    n->destroy();
    n = run;
    ++e.packed;
  }
}

class PackedLinears final : public RegionLayout {
public:
  PackedLinears() : RegionLayout("contiguous+packed") {}
  RegionEdit apply(torch::jit::Graph& g, LayoutRegion& r) const override {
    RegionEdit e;
    layouts::packOps(g, r, e, "aten::linear", "xalloc::linear_packed",
                     [](const torch::jit::Node* n, const std::string& post) -> c10::IValue {
                       auto w = layouts::constantTensor(n->input(1));
                       c10::optional<at::Tensor> b;
                       if (n->input(2)->type()->kind() != c10::TypeKind::NoneType) {
                         auto bt = layouts::constantTensor(n->input(2));
                         if (!bt)
                           return {};
                         b = *bt;
                       }
                       if (!w)
                         return {};
                       return c10::make_intrusive<runtime::PackedLinear>(*w, b, post);
                     });
    packAttention(g, r, e);
    e.applied = e.packed > 0;
    if (!e.applied)
      e.message = "no linear or attention block with constant weights";
    return e;
  }
  bool appliedAt(const torch::jit::Node* now, const std::string&) const override {
    return now->kind() == layouts::sym("xalloc::linear_packed") ||
           now->kind() == layouts::sym("xalloc::attention_packed");
  }
};
} // namespace

const RegionLayout& packed_linearsLayout() {
  static const PackedLinears layout;
  return layout;
}

} // namespace xalloc::tspass
