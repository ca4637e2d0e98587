// The op facts table (op_facts.h): one row per op kind.
#include "xalloc/formats/op_facts.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace xalloc::formats {

namespace {

OpFacts metadata(const char* kind, bool sees_layout = false) {
  OpFacts f{kind};
  f.reads_elements = false;
  f.sees_layout = sees_layout;
  return f;
}

OpFacts view(const char* kind) {
  OpFacts f{kind};
  f.is_view = true;
  return f;
}

OpFacts family(const char* kind, OpFamily fam, bool mkldnn, const char* fusible = "",
               const char* blocked_form = "") {
  OpFacts f{kind};
  f.family = fam;
  f.mkldnn = mkldnn;
  f.fusible = fusible;
  f.blocked_form = blocked_form;
  return f;
}

const std::vector<OpFacts>& rows() {
  using F = OpFamily;
  static const std::vector<OpFacts> r = {
      // metadata: the layout does not change the answer
      metadata("aten::size"),
      metadata("aten::dim"),
      metadata("aten::numel"),
      metadata("aten::len"),
      metadata("prim::device"),
      metadata("prim::dtype"),
      metadata("prim::layout"),
      metadata("prim::requires_grad"),
      metadata("prim::is_cuda"),
      metadata("prim::shape"),
      metadata("aten::is_floating_point"),
      // metadata the layout (strides) or the tensor's identity decides
      metadata("aten::stride", true),
      metadata("aten::is_contiguous", true),
      metadata("aten::__is__", true),
      metadata("aten::__isnot__", true),
      // views
      view("aten::view"),
      view("aten::reshape"),
      view("aten::transpose"),
      view("aten::permute"),
      view("aten::t"),
      view("aten::select"),
      view("aten::slice"),
      view("aten::narrow"),
      view("aten::expand"),
      view("aten::unsqueeze"),
      view("aten::squeeze"),
      view("aten::as_strided"),
      view("aten::unflatten"),
      view("aten::split"),
      view("aten::chunk"),
      // convolutions
      family("aten::conv2d", F::Conv, true),
      family("aten::conv3d", F::Conv, true),
      // activations (and dropout in eval mode, the identity). The runtime's blocked forms:
      // libtorch's MKLDNN relu drops NaN, and its out-of-place MKLDNN hardswish, hardsigmoid
      // and relu6 are wrong when the channels are not a multiple of the block.
      family("aten::relu", F::Unary, true, "relu", "xalloc::blocked_relu"),
      family("aten::relu6", F::Unary, true, "relu6", "xalloc::blocked_relu6"),
      family("aten::silu", F::Unary, false, "silu"),
      family("aten::hardswish", F::Unary, true, "hardswish", "xalloc::blocked_hardswish"),
      family("aten::hardsigmoid", F::Unary, true, "hardsigmoid", "xalloc::blocked_hardsigmoid"),
      family("aten::sigmoid", F::Unary, true, "sigmoid"),
      family("aten::tanh", F::Unary, false, "tanh"),
      family("aten::gelu", F::Unary, false, "gelu"),
      family("aten::hardtanh", F::Unary, false),
      family("aten::leaky_relu", F::Unary, false),
      family("aten::elu", F::Unary, false),
      family("aten::mish", F::Unary, false),
      family("aten::dropout", F::Unary, true),
      family("aten::feature_dropout", F::Unary, false),
      // elementwise binary ops (residual adds, squeeze-and-excitation scales)
      family("aten::add", F::Binary, true),
      family("aten::sub", F::Binary, false),
      family("aten::mul", F::Binary, true),
      family("aten::div", F::Binary, false),
      // norms
      family("aten::batch_norm", F::Norm, false),
      // pooling (libtorch's MKLDNN max pooling drops NaN)
      family("aten::max_pool2d", F::Pool, true, "", "xalloc::blocked_max_pool2d"),
      family("aten::avg_pool2d", F::Pool, true),
      family("aten::adaptive_avg_pool2d", F::Pool, true),
      family("aten::max_pool3d", F::Pool, true, "", "xalloc::blocked_max_pool3d"),
      family("aten::avg_pool3d", F::Pool, false),
      family("aten::adaptive_avg_pool3d", F::Pool, false),
      // resizing (a segmenter's head, ASPP's pooled branch brought back to size): input 0 sets
      // the layout of the output, as pooling's does
      family("aten::upsample_bilinear2d", F::Pool, false),
      family("aten::upsample_nearest2d", F::Pool, false),
      family("aten::upsample_trilinear3d", F::Pool, false),
      family("aten::upsample_nearest3d", F::Pool, false),
      // concatenation (of a list built for it alone: tspass/layout_families.cpp); each input
      // keeps its layout in the output, so a region runs through it (SqueezeNet's Fire
      // modules, DenseNet's blocks)
      family("aten::cat", F::Concat, false),
      // linears: row-major activations, the weight the only layout to choose
      family("aten::linear", F::Linear, false),
  };
  return r;
}

} // namespace

const std::vector<OpFacts>& opFactsTable() {
  return rows();
}

bool isInPlaceKind(std::string_view kind) {
  return kind.size() > 2 && kind.back() == '_' && kind[kind.size() - 2] != '_';
}

const OpFacts* opFacts(std::string_view kind) {
  static const std::unordered_map<std::string, const OpFacts*> index = [] {
    std::unordered_map<std::string, const OpFacts*> m;
    for (const OpFacts& f : rows())
      m.emplace(f.kind, &f);
    return m;
  }();
  std::string k(kind);
  if (isInPlaceKind(k))
    k.pop_back();
  auto it = index.find(k);
  return it == index.end() ? nullptr : it->second;
}

bool readsOnlyLayoutFreeMetadata(std::string_view kind) {
  const OpFacts* f = opFacts(kind);
  return f && !f->reads_elements && !f->sees_layout;
}

bool readsNoElements(std::string_view kind) {
  const OpFacts* f = opFacts(kind);
  return f && !f->reads_elements;
}

bool isViewOp(std::string_view kind) {
  const OpFacts* f = opFacts(kind);
  return f && f->is_view && !isInPlaceKind(kind); // squeeze_ changes its own tensor
}

} // namespace xalloc::formats
