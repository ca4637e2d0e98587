// The packed classes and ops as TorchScript sees them (packed.h), and the blocked regions'
// constants and broadcasts. Each op's kernel is registered without a dispatch key, so autograd
// runs through it: when gradients are wanted the packed ops compute with ATen's own ops, whose
// history the output then carries.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/custom_class.h>

#include "packed_checks.h"
#include "xalloc/runtime/packed.h"

namespace xalloc::runtime {

MkldnnConstant::MkldnnConstant(at::Tensor dense_in, std::vector<std::int64_t> conv_in)
    : dense(std::move(dense_in)), conv(std::move(conv_in)) {
  constexpr const char* who = "xalloc.MkldnnConstant";
  detail::checkStoredTensor(dense, who, "tensor");
  TORCH_CHECK(dense.dim() > 0 && dense.numel() > 0, who,
              ": needs a non-empty tensor with at least one dimension, got sizes ", dense.sizes());
  if (!conv.empty()) {
    // [padding.., stride.., dilation.., groups]: 7 numbers for a 2-D convolution's 4-D weight,
    // 10 for a 3-D one's 5-D weight.
    const std::size_t dims = (conv.size() - 1) / 3;
    TORCH_CHECK((conv.size() == 7 || conv.size() == 10) &&
                    dense.dim() == static_cast<std::int64_t>(dims) + 2,
                who,
                ": a convolution's weight takes [padding, stride, dilation, groups] (7 numbers "
                "and 4 dimensions for a 2-D convolution, 10 and 5 for a 3-D one), got ",
                conv.size(), " numbers and sizes ", dense.sizes());
    const at::IntArrayRef spec(conv);
    detail::checkConvParams(who, spec.slice(dims, dims), spec.slice(0, dims),
                            spec.slice(2 * dims, dims), conv[3 * dims], dense.size(0), dims);
  }
  dense = dense.contiguous();
  if (!dense.device().is_cpu())
    return; // refused when used (get)
  mkldnn = dense.to_mkldnn();
  if (conv.size() == 7)
    mkldnn = at::mkldnn_reorder_conv2d_weight(mkldnn, {conv[0], conv[1]}, {conv[2], conv[3]},
                                              {conv[4], conv[5]}, conv[6]);
  else if (conv.size() == 10)
    mkldnn = at::mkldnn_reorder_conv3d_weight(mkldnn, {conv[0], conv[1], conv[2]},
                                              {conv[3], conv[4], conv[5]},
                                              {conv[6], conv[7], conv[8]}, conv[9]);
}

const at::Tensor& MkldnnConstant::get() const {
  detail::checkOnCpu(dense, "xalloc.MkldnnConstant", "tensor");
  return mkldnn;
}

namespace {

// mkldnn tensors cannot be expanded or viewed: a broadcast operand is reshaped when it has as
// many elements as the result, else expanded densely and converted back (what torch's own
// prim::BroadcastMKLDNNTensors does; that op has no schema, so a model holding it cannot be
// saved and loaded again).
std::tuple<at::Tensor, at::Tensor> broadcastMkldnn(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes().equals(b.sizes()))
    return {a, b};
  const auto out = at::infer_size(a.sizes(), b.sizes());
  std::int64_t numel = 1;
  for (auto s : out)
    numel *= s;
  auto fit = [&](const at::Tensor& t) -> at::Tensor {
    if (t.sizes().equals(out))
      return t;
    if (t.numel() == numel)
      return t.reshape(out);
    return t.to_dense().expand(out).to_mkldnn();
  };
  return {fit(a), fit(b)};
}

const auto kPackedConvClass =
    torch::class_<PackedConv>("xalloc", "PackedConv")
        .def(torch::init<at::Tensor, c10::optional<at::Tensor>, std::vector<std::int64_t>,
                         std::vector<std::int64_t>, std::vector<std::int64_t>, std::int64_t,
                         std::string>())
        .def("run", &PackedConv::run)
        .def_pickle([](const c10::intrusive_ptr<PackedConv>& self) { return self->state(); },
                    [](PackedConv::State s) {
                      auto& [w, b, st, pad, dil, g, post] = s;
                      return c10::make_intrusive<PackedConv>(w, b, st, pad, dil, g, post);
                    });

const auto kPackedLinearClass =
    torch::class_<PackedLinear>("xalloc", "PackedLinear")
        .def(torch::init<at::Tensor, c10::optional<at::Tensor>, std::string>())
        .def("run", &PackedLinear::run)
        .def_pickle([](const c10::intrusive_ptr<PackedLinear>& self) { return self->state(); },
                    [](PackedLinear::State s) {
                      return c10::make_intrusive<PackedLinear>(std::get<0>(s), std::get<1>(s),
                                                               std::get<2>(s));
                    });

const auto kPackedAttentionClass =
    torch::class_<PackedAttention>("xalloc", "PackedAttention")
        .def(torch::init<std::int64_t, std::int64_t, at::Tensor, at::Tensor, at::Tensor,
                         at::Tensor>())
        .def_pickle([](const c10::intrusive_ptr<PackedAttention>& self) { return self->state(); },
                    [](PackedAttention::State s) {
                      auto& [e, h, qw, qb, pw, pb] = s;
                      return c10::make_intrusive<PackedAttention>(e, h, qw, qb, pw, pb);
                    });

using MkldnnState = std::tuple<at::Tensor, std::vector<std::int64_t>>;
const auto kMkldnnConstantClass =
    torch::class_<MkldnnConstant>("xalloc", "MkldnnConstant")
        .def(torch::init<at::Tensor, std::vector<std::int64_t>>())
        .def_pickle(
            [](const c10::intrusive_ptr<MkldnnConstant>& self) {
              return MkldnnState{self->dense, self->conv};
            },
            [](MkldnnState s) {
              return c10::make_intrusive<MkldnnConstant>(std::get<0>(s), std::get<1>(s));
            });

TORCH_LIBRARY_FRAGMENT(xalloc, m) {
  m.def("conv2d_packed(Tensor x, __torch__.torch.classes.xalloc.PackedConv w) -> Tensor",
        [](const at::Tensor& x, const c10::intrusive_ptr<PackedConv>& w) {
          w->checkCalledAs(2, false);
          return w->run(x);
        });
  m.def("conv3d_packed(Tensor x, __torch__.torch.classes.xalloc.PackedConv w) -> Tensor",
        [](const at::Tensor& x, const c10::intrusive_ptr<PackedConv>& w) {
          w->checkCalledAs(3, false);
          return w->run(x);
        });
  m.def("linear_packed(Tensor x, __torch__.torch.classes.xalloc.PackedLinear w) -> Tensor",
        [](const at::Tensor& x, const c10::intrusive_ptr<PackedLinear>& w) { return w->run(x); });
  m.def("attention_packed(Tensor query, Tensor key, Tensor value, "
        "__torch__.torch.classes.xalloc.PackedAttention a, Tensor? mask=None, bool "
        "need_weights=True, bool average_attn_weights=True, int? mask_type=None) -> (Tensor, "
        "Tensor)",
        [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
           const c10::intrusive_ptr<PackedAttention>& a, const c10::optional<at::Tensor>& mask,
           bool need_weights, bool average, c10::optional<std::int64_t> mask_type) {
          return a->run(q, k, v, mask, need_weights, average, mask_type);
        });
  m.def("mkldnn_constant(__torch__.torch.classes.xalloc.MkldnnConstant c) -> Tensor",
        [](const c10::intrusive_ptr<MkldnnConstant>& c) { return c->get(); });
}

// The residual adds, boxed: the residual is popped off the interpreter's stack, so that a value
// passed at its last use arrives as the only handle of its tensor, which the convolution then
// adds into (runAddInto) instead of a copy; one held anywhere else is copied. Through the
// dispatcher's typed calls a caller's tensor would arrive as a borrowed reference instead.
torch::jit::Operation convAddOp(std::int64_t dims) {
  return [dims](torch::jit::Stack& stack) {
    RECORD_FUNCTION(dims == 3 ? "xalloc::conv3d_packed_add" : "xalloc::conv2d_packed_add",
                    c10::ArrayRef<const c10::IValue>{});
    at::Tensor r = torch::jit::pop(stack).toTensor();
    auto w = torch::jit::pop(stack).toCustomClass<PackedConv>();
    at::Tensor x = torch::jit::pop(stack).toTensor();
    w->checkCalledAs(dims, true);
    torch::jit::push(stack, w->runAddInto(x, std::move(r)));
  };
}
const torch::jit::RegisterOperators kConvAddOps(
    {torch::jit::Operator("xalloc::conv2d_packed_add(Tensor x, "
                          "__torch__.torch.classes.xalloc.PackedConv w, Tensor residual) -> Tensor",
                          convAddOp(2), c10::AliasAnalysisKind::FROM_SCHEMA),
     torch::jit::Operator("xalloc::conv3d_packed_add(Tensor x, "
                          "__torch__.torch.classes.xalloc.PackedConv w, Tensor residual) -> Tensor",
                          convAddOp(3), c10::AliasAnalysisKind::FROM_SCHEMA),
     // Boxed for the same reason: an input at its last use is scaled in place.
     torch::jit::Operator(
         "xalloc::squeeze_excite(Tensor x, __torch__.torch.classes.xalloc.PackedConv reduce, "
         "__torch__.torch.classes.xalloc.PackedConv expand) -> Tensor",
         [](torch::jit::Stack& stack) {
           RECORD_FUNCTION("xalloc::squeeze_excite", c10::ArrayRef<const c10::IValue>{});
           auto expand = torch::jit::pop(stack).toCustomClass<PackedConv>();
           auto reduce = torch::jit::pop(stack).toCustomClass<PackedConv>();
           at::Tensor x = torch::jit::pop(stack).toTensor();
           torch::jit::push(stack, squeezeExciteInto(std::move(x), reduce, expand));
         },
         c10::AliasAnalysisKind::FROM_SCHEMA)});

// A JIT operator, as libtorch registers its own: through the dispatcher (TORCH_LIBRARY), the
// expanded operand came out such that an in-place MKLDNN mul on it took 100 ms instead of 0.8
// (a squeeze-and-excitation scale at batch 8).
const torch::jit::RegisterOperators kBroadcastOp({torch::jit::Operator(
    "xalloc::broadcast_mkldnn(Tensor a, Tensor b) -> (Tensor, Tensor)",
    [](torch::jit::Stack& stack) {
      at::Tensor b = torch::jit::pop(stack).toTensor();
      at::Tensor a = torch::jit::pop(stack).toTensor();
      auto [x, y] = broadcastMkldnn(a, b);
      torch::jit::push(stack, std::move(x), std::move(y));
    },
    c10::AliasAnalysisKind::FROM_SCHEMA)});

} // namespace

} // namespace xalloc::runtime
