// The op families that accept and keep a layout: one entry per op kind, what it is, whether it
// writes its input, the activation a packed convolution fuses for it, and whether libtorch 1.13
// computes it on blocked (MKLDNN) tensors (frozen_ops_to_mkldnn.cpp's list).
#include "xalloc/tspass/layout_families.h"

#include <map>

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

namespace xalloc::tspass {

using torch::jit::Node;

namespace {

struct Entry {
  LayoutFamily family;
  const char* fusible; // "" when not
  bool mkldnn;
};

// Without the trailing underscore of the in-place variants, which are looked up the same.
const std::map<std::string, Entry>& table() {
  static const std::map<std::string, Entry> t = {
      // convolutions
      {"conv2d", {LayoutFamily::Conv, "", true}},
      {"conv3d", {LayoutFamily::Conv, "", false}},
      // activations (and dropout in eval mode, the identity)
      {"relu", {LayoutFamily::Unary, "relu", true}},
      {"relu6", {LayoutFamily::Unary, "relu6", true}},
      {"silu", {LayoutFamily::Unary, "silu", false}},
      {"hardswish", {LayoutFamily::Unary, "hardswish", true}},
      {"hardsigmoid", {LayoutFamily::Unary, "hardsigmoid", true}},
      {"sigmoid", {LayoutFamily::Unary, "sigmoid", true}},
      {"tanh", {LayoutFamily::Unary, "tanh", false}},
      {"gelu", {LayoutFamily::Unary, "gelu", false}},
      {"hardtanh", {LayoutFamily::Unary, "", false}},
      {"leaky_relu", {LayoutFamily::Unary, "", false}},
      {"elu", {LayoutFamily::Unary, "", false}},
      {"mish", {LayoutFamily::Unary, "", false}},
      {"dropout", {LayoutFamily::Unary, "", true}},
      {"feature_dropout", {LayoutFamily::Unary, "", false}},
      // elementwise binary ops (residual adds, squeeze-and-excitation scales)
      {"add", {LayoutFamily::Binary, "", true}},
      {"sub", {LayoutFamily::Binary, "", false}},
      {"mul", {LayoutFamily::Binary, "", true}},
      {"div", {LayoutFamily::Binary, "", false}},
      // norms
      {"batch_norm", {LayoutFamily::Norm, "", false}},
      // pooling
      {"max_pool2d", {LayoutFamily::Pool, "", true}},
      {"avg_pool2d", {LayoutFamily::Pool, "", true}},
      {"adaptive_avg_pool2d", {LayoutFamily::Pool, "", true}},
      {"max_pool3d", {LayoutFamily::Pool, "", false}},
      {"avg_pool3d", {LayoutFamily::Pool, "", false}},
      {"adaptive_avg_pool3d", {LayoutFamily::Pool, "", false}},
      // linears: row-major activations, the weight the only layout to choose
      {"linear", {LayoutFamily::Linear, "", false}},
  };
  return t;
}

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

} // namespace

FamilyInfo layoutFamily(const Node* n) {
  FamilyInfo info;
  const std::string qual = n->kind().toQualString();
  if (qual.rfind("aten::", 0) != 0 || n->outputs().size() != 1 || !isTensor(n->output()) ||
      n->inputs().empty() || !isTensor(n->input(0)))
    return info;
  std::string name = qual.substr(6);
  bool in_place = false;
  if (!name.empty() && name.back() == '_') {
    in_place = true;
    name.pop_back();
  }
  auto it = table().find(name);
  if (it == table().end())
    return info;
  const Entry& e = it->second;
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
  if (e.family == LayoutFamily::Conv) {
    // conv2d.padding (a string: 'same', 'valid') computes its padding at run time.
    if (n->inputs().size() != 7 || !n->input(4)->type()->cast<c10::ListType>())
      return info;
  }
  info.family = e.family;
  info.in_place = in_place;
  info.mkldnn = e.mkldnn;
  info.fusible = e.fusible;
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
  if (e.family == LayoutFamily::Binary) {
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
  static const std::vector<std::string> kinds = {"aten::size",  "aten::dim",    "aten::numel",
                                                 "prim::dtype", "prim::device", "aten::len"};
  const std::string qual = n->kind().toQualString();
  for (const auto& k : kinds)
    if (qual == k)
      return true;
  return false;
}

} // namespace xalloc::tspass
