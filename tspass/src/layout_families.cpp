// The op families that accept and keep a layout: the op facts table's row (formats/op_facts.h),
// refined by the handlers of the ops whose arguments decide (dropout and batch norm in training,
// string padding, the tanh GELU, hardtanh as relu6, MKLDNN's binary ops).
#include "xalloc/tspass/layout_families.h"

#include <numeric>

#include "xalloc/formats/op_facts.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

namespace xalloc::tspass {

using torch::jit::Node;

namespace {

std::optional<bool> constantBool(const torch::jit::Value* v) {
  auto iv = torch::jit::toIValue(v);
  if (!iv || !iv->isBool())
    return std::nullopt;
  return iv->toBool();
}

std::optional<double> constantNumber(const torch::jit::Value* v) {
  auto iv = torch::jit::toIValue(v);
  if (!iv)
    return std::nullopt;
  if (iv->isDouble())
    return iv->toDouble();
  if (iv->isInt())
    return static_cast<double>(iv->toInt());
  return std::nullopt;
}

bool isTensor(const torch::jit::Value* v) {
  return v->type()->cast<c10::TensorType>() != nullptr;
}

// The list a concatenation in a region reads: built by prim::ListConstruct of tensors, read by
// that concatenation alone.
bool isConcatList(const torch::jit::Value* list) {
  const Node* l = list->node();
  if (l->kind() != c10::prim::ListConstruct || l->inputs().empty() || list->uses().size() != 1)
    return false;
  for (const torch::jit::Value* v : l->inputs())
    if (!isTensor(v))
      return false;
  return true;
}

// aten::cat(ListConstruct(...), dim) with a constant dim, and that list: family Concat.
FamilyInfo concatFamily(const Node* n) {
  FamilyInfo info;
  const formats::OpFacts* e = formats::opFacts("aten::cat");
  if (!e || e->family != LayoutFamily::Concat)
    return info;
  const Node* cat = n;
  if (n->kind() == c10::prim::ListConstruct) {
    if (n->output()->uses().size() != 1 || n->output()->uses()[0].offset != 0)
      return info;
    cat = n->output()->uses()[0].user;
  }
  if (cat->kind() != c10::aten::cat || cat->inputs().size() != 2 || cat->outputs().size() != 1 ||
      !isTensor(cat->output()) || !isConcatList(cat->input(0)) ||
      !torch::jit::toIValue(cat->input(1)))
    return info;
  info.family = LayoutFamily::Concat;
  info.mkldnn = e->mkldnn;
  return info;
}

} // namespace

FamilyInfo layoutFamily(const Node* n) {
  if (n->kind() == c10::aten::cat || n->kind() == c10::prim::ListConstruct)
    return concatFamily(n);
  FamilyInfo info;
  const std::string qual = n->kind().toQualString();
  if (qual.rfind("aten::", 0) != 0 || n->outputs().size() != 1 || !isTensor(n->output()) ||
      n->inputs().empty() || !isTensor(n->input(0)))
    return info;
  const formats::OpFacts* e = formats::opFacts(qual);
  if (!e || e->family == LayoutFamily::None)
    return info;
  const bool in_place = formats::isInPlaceKind(qual);
  const std::string name = std::string(e->kind).substr(6);
  // Arguments that make an op of the family change the layout or the values.
  if (name == "dropout" || name == "feature_dropout") {
    auto train = constantBool(n->input(2));
    if (!train || *train)
      return info;
  }
  if (name == "batch_norm") {
    auto training = n->inputs().size() > 5 ? constantBool(n->input(5)) : std::nullopt;
    if (!training || *training)
      return info;
  }
  if (e->family == LayoutFamily::Conv) {
    // conv2d.padding (a string: 'same', 'valid') computes its padding at run time.
    if (n->inputs().size() != 7 || !n->input(4)->type()->cast<c10::ListType>())
      return info;
  }
  info.family = e->family;
  info.in_place = in_place;
  info.mkldnn = e->mkldnn;
  info.fusible = e->fusible;
  if (name == "gelu") {
    // Only the exact (erf) GELU: the tanh approximation is another function.
    c10::optional<c10::IValue> approx;
    if (n->inputs().size() > 1)
      approx = torch::jit::toIValue(n->input(1));
    if (!approx || !approx->isString() || approx->toStringRef() != "none")
      info.fusible.clear();
  }
  if (name == "hardtanh") {
    // hardtanh(x, 0, 6) is relu6.
    auto lo = constantNumber(n->input(1)), hi = constantNumber(n->input(2));
    if (lo && hi && *lo == 0.0 && *hi == 6.0)
      info.fusible = "relu6";
  }
  if (e->family == LayoutFamily::Binary) {
    // Blocked tensors add and multiply tensor by tensor only (no alpha other than 1).
    for (std::size_t i = 0; i < 2 && i < n->inputs().size(); ++i)
      if (!isTensor(n->input(i)))
        info.mkldnn = false;
    if ((name == "add") && n->inputs().size() > 2) {
      auto alpha = constantNumber(n->input(2));
      if (!alpha || *alpha != 1.0)
        info.mkldnn = false;
    }
  }
  return info;
}

std::vector<std::size_t> activationInputs(const Node* n, LayoutFamily f) {
  switch (f) {
  case LayoutFamily::None:
    return {};
  case LayoutFamily::Concat: { // the list's tensors; the concatenation's list
    if (n->kind() != c10::prim::ListConstruct)
      return {0};
    std::vector<std::size_t> out(n->inputs().size());
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  case LayoutFamily::Binary: {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < n->inputs().size() && i < 2; ++i)
      if (isTensor(n->input(i)))
        out.push_back(i);
    return out;
  }
  default:
    return {0};
  }
}

bool readsMetadataOnly(const Node* n) {
  return formats::readsOnlyLayoutFreeMetadata(n->kind().toQualString());
}

} // namespace xalloc::tspass
