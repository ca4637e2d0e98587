// Packed linears: a linear with a constant weight (a region of its own, row-major activations)
// becomes the runtime's xalloc::linear_packed, the activation that is its only reader fused.
#include "edit.h"
#include "xalloc/runtime/packed.h"
#include "xalloc/tspass/region_layouts.h"

namespace xalloc::tspass {

namespace {
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
    e.applied = e.packed > 0;
    if (!e.applied)
      e.message = "no linear with a constant weight";
    return e;
  }
  bool appliedAt(const torch::jit::Node* now, const std::string&) const override {
    return now->kind() == layouts::sym("xalloc::linear_packed");
  }
};
} // namespace

const RegionLayout& packed_linearsLayout() {
  static const PackedLinears layout;
  return layout;
}

} // namespace xalloc::tspass
