// xalloc::conv2d_packed and xalloc::linear_packed: frozen convolutions and linears whose weights
// oneDNN packs once per input shape, with the activation after them fused (packed.h); and the
// blocked regions' constants and broadcasts.
#include "xalloc/runtime/packed.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/custom_class.h>

#ifdef XALLOC_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace xalloc::runtime {

namespace {
constexpr std::pair<PostOp, const char*> kPostOps[] = {
    {PostOp::None, "none"},       {PostOp::Relu, "relu"},
    {PostOp::Silu, "silu"},       {PostOp::Hardswish, "hardswish"},
    {PostOp::Sigmoid, "sigmoid"}, {PostOp::Gelu, "gelu"},
    {PostOp::Relu6, "relu6"},     {PostOp::Hardsigmoid, "hardsigmoid"},
    {PostOp::Tanh, "tanh"}};
} // namespace

std::optional<PostOp> parsePostOp(const std::string& name) {
  for (const auto& [p, n] : kPostOps)
    if (name == n)
      return p;
  return std::nullopt;
}

const char* postOpName(PostOp p) {
  for (const auto& [q, n] : kPostOps)
    if (p == q)
      return n;
  return "?";
}

std::optional<PostOp> postOpForAten(const std::string& kind) {
  std::string k = kind;
  if (k.rfind("aten::", 0) != 0)
    return std::nullopt;
  k = k.substr(6);
  if (!k.empty() && k.back() == '_')
    k.pop_back();
  if (k == "relu6" || k == "hardtanh" || k == "none")
    return std::nullopt; // relu6 is hardtanh(0, 6): the caller checks its bounds
  return parsePostOp(k);
}

#ifdef XALLOC_WITH_DNNL

bool hasPackedConv() {
  return true;
}

namespace {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

dnnl::post_ops postOps(PostOp p) {
  using A = dnnl::algorithm;
  dnnl::post_ops po;
  switch (p) {
  case PostOp::None:
    break;
  case PostOp::Relu:
    po.append_eltwise(1.f, A::eltwise_relu, 0.f, 0.f);
    break;
  case PostOp::Silu:
    po.append_eltwise(1.f, A::eltwise_swish, 1.f, 0.f);
    break;
  case PostOp::Hardswish:
    po.append_eltwise(1.f, A::eltwise_hardswish, 0.f, 0.f);
    break;
  case PostOp::Sigmoid:
    po.append_eltwise(1.f, A::eltwise_logistic, 0.f, 0.f);
    break;
  case PostOp::Gelu:
    po.append_eltwise(1.f, A::eltwise_gelu_erf, 0.f, 0.f);
    break;
  case PostOp::Relu6:
    po.append_eltwise(1.f, A::eltwise_clip, 0.f, 6.f);
    break;
  case PostOp::Hardsigmoid: // relu6(x + 3) / 6
    po.append_eltwise(1.f, A::eltwise_linear, 1.f / 6.f, 0.5f);
    po.append_eltwise(1.f, A::eltwise_clip, 0.f, 1.f);
    break;
  case PostOp::Tanh:
    po.append_eltwise(1.f, A::eltwise_tanh, 0.f, 0.f);
    break;
  }
  return po;
}

} // namespace

struct PackedConv::Prepared {
  std::vector<std::int64_t> input_sizes;
  std::vector<std::int64_t> output_sizes;
  dnnl::convolution_forward primitive;
  dnnl::memory::desc src, dst;
  dnnl::memory weights; // packed, owned by oneDNN
  dnnl::memory bias;
};

const PackedConv::Prepared& PackedConv::prepare(const at::Tensor& x) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& p : prepared_)
    if (x.sizes().equals(p->input_sizes))
      return *p;
  using dnnl::memory;
  const auto& w = weight.sizes();
  const std::int64_t n = x.size(0), ic = x.size(1), h = x.size(2), wd = x.size(3);
  const std::int64_t oc = w[0], kh = w[2], kw = w[3];
  TORCH_CHECK(ic == w[1] * groups, "xalloc::conv2d_packed: input has ", ic,
              " channels, the weight expects ", w[1] * groups);
  const std::int64_t oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) / stride[0] + 1;
  const std::int64_t ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) / stride[1] + 1;
  TORCH_CHECK(oh > 0 && ow > 0, "xalloc::conv2d_packed: the input is smaller than the kernel");

  auto p = std::make_unique<Prepared>();
  p->input_sizes = x.sizes().vec();
  p->output_sizes = {n, oc, oh, ow};
  const auto f32 = memory::data_type::f32;
  p->src = memory::desc({n, ic, h, wd}, f32, memory::format_tag::nhwc);
  p->dst = memory::desc({n, oc, oh, ow}, f32, memory::format_tag::nhwc);
  const memory::dims wdims =
      groups > 1 ? memory::dims{groups, oc / groups, w[1], kh, kw} : memory::dims{oc, w[1], kh, kw};
  const memory::desc w_any(wdims, f32, memory::format_tag::any);
  const memory::desc b_md({oc}, f32, memory::format_tag::x);
  const memory::dims strides{stride[0], stride[1]};
  const memory::dims dil{dilation[0] - 1, dilation[1] - 1};
  const memory::dims pad{padding[0], padding[1]};
  const auto desc =
      bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, p->src, w_any,
                                             b_md, p->dst, strides, dil, pad, pad)
           : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, p->src, w_any,
                                             p->dst, strides, dil, pad, pad);
  dnnl::primitive_attr attr;
  attr.set_post_ops(postOps(post));
  const dnnl::convolution_forward::primitive_desc pd(desc, attr, engine());
  p->primitive = dnnl::convolution_forward(pd);

  // The weight, packed once: from the dense (o, i, h, w) layout into what the kernel reads.
  const at::Tensor dense = weight.contiguous();
  const memory::desc plain_md(wdims, f32,
                              groups > 1 ? memory::format_tag::goihw : memory::format_tag::oihw);
  memory plain(plain_md, engine(), dense.data_ptr());
  p->weights = memory(pd.weights_desc(), engine());
  dnnl::reorder(plain, p->weights).execute(stream(), plain, p->weights);
  if (bias) {
    p->bias = memory(b_md, engine());
    const at::Tensor b = bias->contiguous();
    std::memcpy(p->bias.get_data_handle(), b.data_ptr(), static_cast<std::size_t>(oc) * 4);
  }
  stream().wait();
  prepared_.push_back(std::move(p));
  return *prepared_.back();
}

at::Tensor PackedConv::run(const at::Tensor& x_in) {
  TORCH_CHECK(x_in.dim() == 4 && x_in.scalar_type() == at::kFloat && x_in.device().is_cpu(),
              "xalloc::conv2d_packed: needs a 4-D float32 CPU input, got ", x_in.sizes(), " ",
              x_in.scalar_type());
  const at::Tensor x = x_in.contiguous(at::MemoryFormat::ChannelsLast);
  const Prepared& p = prepare(x);
  at::Tensor out =
      at::empty(p.output_sizes, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  dnnl::memory src(p.src, engine(), x.data_ptr());
  dnnl::memory dst(p.dst, engine(), out.data_ptr());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, p.weights}, {DNNL_ARG_DST, dst}};
  if (bias)
    args.emplace(DNNL_ARG_BIAS, p.bias);
  p.primitive.execute(stream(), args);
  stream().wait();
  return out;
}

struct PackedLinear::Prepared {
  std::int64_t rows = 0;
  dnnl::inner_product_forward primitive;
  dnnl::memory::desc src, dst;
  dnnl::memory weights; // packed, owned by oneDNN
  dnnl::memory bias;
};

const PackedLinear::Prepared& PackedLinear::prepare(std::int64_t rows) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& p : prepared_)
    if (p->rows == rows)
      return *p;
  using dnnl::memory;
  const std::int64_t out = weight.size(0), in = weight.size(1);
  auto p = std::make_unique<Prepared>();
  p->rows = rows;
  const auto f32 = memory::data_type::f32;
  p->src = memory::desc({rows, in}, f32, memory::format_tag::nc);
  p->dst = memory::desc({rows, out}, f32, memory::format_tag::nc);
  const memory::desc w_any({out, in}, f32, memory::format_tag::any);
  const memory::desc b_md({out}, f32, memory::format_tag::x);
  const auto desc = bias ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference,
                                                             p->src, w_any, b_md, p->dst)
                         : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference,
                                                             p->src, w_any, p->dst);
  dnnl::primitive_attr attr;
  attr.set_post_ops(postOps(post));
  const dnnl::inner_product_forward::primitive_desc pd(desc, attr, engine());
  p->primitive = dnnl::inner_product_forward(pd);
  memory plain(memory::desc({out, in}, f32, memory::format_tag::oi), engine(), weight.data_ptr());
  p->weights = memory(pd.weights_desc(), engine());
  dnnl::reorder(plain, p->weights).execute(stream(), plain, p->weights);
  if (bias) {
    p->bias = memory(b_md, engine());
    const at::Tensor b = bias->contiguous();
    std::memcpy(p->bias.get_data_handle(), b.data_ptr(), static_cast<std::size_t>(out) * 4);
  }
  stream().wait();
  prepared_.push_back(std::move(p));
  return *prepared_.back();
}

at::Tensor PackedLinear::run(const at::Tensor& x_in) {
  TORCH_CHECK(x_in.dim() >= 1 && x_in.scalar_type() == at::kFloat && x_in.device().is_cpu(),
              "xalloc::linear_packed: needs a float32 CPU input, got ", x_in.scalar_type());
  const std::int64_t in = weight.size(1);
  TORCH_CHECK(x_in.size(-1) == in, "xalloc::linear_packed: the input has ", x_in.size(-1),
              " features, the weight expects ", in);
  const at::Tensor x = x_in.contiguous();
  const std::int64_t rows = in == 0 ? 0 : x.numel() / in;
  std::vector<std::int64_t> sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  at::Tensor out = at::empty(sizes, x.options());
  if (rows == 0)
    return out;
  const Prepared& p = prepare(rows);
  dnnl::memory src(p.src, engine(), x.data_ptr());
  dnnl::memory dst(p.dst, engine(), out.data_ptr());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, p.weights}, {DNNL_ARG_DST, dst}};
  if (bias)
    args.emplace(DNNL_ARG_BIAS, p.bias);
  p.primitive.execute(stream(), args);
  stream().wait();
  return out;
}

#else

bool hasPackedConv() {
  return false;
}
struct PackedLinear::Prepared {};
const PackedLinear::Prepared& PackedLinear::prepare(std::int64_t) {
  TORCH_CHECK(false, "xalloc::linear_packed: this runtime was built without oneDNN");
}
at::Tensor PackedLinear::run(const at::Tensor& x) {
  (void)x;
  (void)prepare(0);
  return {};
}
struct PackedConv::Prepared {};
const PackedConv::Prepared& PackedConv::prepare(const at::Tensor&) {
  TORCH_CHECK(false, "xalloc::conv2d_packed: this runtime was built without oneDNN");
}
at::Tensor PackedConv::run(const at::Tensor& x) {
  (void)prepare(x);
  return {};
}

#endif

PackedConv::PackedConv(at::Tensor weight_in, c10::optional<at::Tensor> bias_in,
                       std::vector<std::int64_t> stride_in, std::vector<std::int64_t> padding_in,
                       std::vector<std::int64_t> dilation_in, std::int64_t groups_in,
                       std::string post_op)
    : weight(std::move(weight_in)), bias(std::move(bias_in)), stride(std::move(stride_in)),
      padding(std::move(padding_in)), dilation(std::move(dilation_in)), groups(groups_in) {
  TORCH_CHECK(weight.dim() == 4 && weight.scalar_type() == at::kFloat,
              "xalloc.PackedConv: needs a 4-D float32 weight");
  TORCH_CHECK(stride.size() == 2 && padding.size() == 2 && dilation.size() == 2 && groups >= 1,
              "xalloc.PackedConv: stride, padding and dilation take two numbers each");
  TORCH_CHECK(weight.size(0) % groups == 0, "xalloc.PackedConv: groups must divide the outputs");
  const auto p = parsePostOp(post_op);
  TORCH_CHECK(p, "xalloc.PackedConv: unknown post-op '", post_op, "'");
  post = *p;
  weight = weight.contiguous();
}

PackedConv::~PackedConv() = default;

PackedConv::State PackedConv::state() const {
  return {weight, bias, stride, padding, dilation, groups, postOpName(post)};
}

PackedLinear::PackedLinear(at::Tensor weight_in, c10::optional<at::Tensor> bias_in,
                           std::string post_op)
    : weight(std::move(weight_in)), bias(std::move(bias_in)) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == at::kFloat,
              "xalloc.PackedLinear: needs a 2-D float32 weight");
  TORCH_CHECK(!bias || (bias->dim() == 1 && bias->size(0) == weight.size(0)),
              "xalloc.PackedLinear: the bias needs one value per output");
  const auto p = parsePostOp(post_op);
  TORCH_CHECK(p, "xalloc.PackedLinear: unknown post-op '", post_op, "'");
  post = *p;
  weight = weight.contiguous();
}

PackedLinear::~PackedLinear() = default;

PackedLinear::State PackedLinear::state() const {
  return {weight, bias, postOpName(post)};
}

MkldnnConstant::MkldnnConstant(at::Tensor dense_in, std::vector<std::int64_t> conv_in)
    : dense(std::move(dense_in)), conv(std::move(conv_in)) {
  TORCH_CHECK(dense.scalar_type() == at::kFloat && dense.dim() > 0,
              "xalloc.MkldnnConstant: needs a float32 tensor");
  dense = dense.contiguous();
  mkldnn = dense.to_mkldnn();
  if (!conv.empty()) {
    TORCH_CHECK(conv.size() == 7 && dense.dim() == 4,
                "xalloc.MkldnnConstant: a 2-D convolution's weight takes [padding, stride, "
                "dilation, groups] (7 numbers)");
    mkldnn = at::mkldnn_reorder_conv2d_weight(mkldnn, {conv[0], conv[1]}, {conv[2], conv[3]},
                                              {conv[4], conv[5]}, conv[6]);
  }
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
        [](const at::Tensor& x, const c10::intrusive_ptr<PackedConv>& w) { return w->run(x); });
  m.def("linear_packed(Tensor x, __torch__.torch.classes.xalloc.PackedLinear w) -> Tensor",
        [](const at::Tensor& x, const c10::intrusive_ptr<PackedLinear>& w) { return w->run(x); });
  m.def("mkldnn_constant(__torch__.torch.classes.xalloc.MkldnnConstant c) -> Tensor",
        [](const c10::intrusive_ptr<MkldnnConstant>& c) { return c->mkldnn; });
}

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
