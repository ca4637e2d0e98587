// xalloc::conv2d_packed and xalloc::linear_packed: frozen convolutions and linears whose weights
// oneDNN packs once per input shape (a bounded LRU of shapes; shapes whose kernels read the same
// packed layout share one copy of the weight), with the activation after them fused (packed.h).
// Each call runs the shared primitive with a scratchpad of its own thread, so any number of
// threads may call one op at once.
#include "xalloc/runtime/packed.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include <ATen/ATen.h>

#include "env_count.h"
#include "finite_scan.h"
#include "packed_checks.h"

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

constexpr std::size_t kMaxCache = 4096;
std::atomic<std::size_t> g_cache_capacity{0}; // 0: not read from the environment yet
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

std::size_t packedCacheCapacity() {
  std::size_t c = g_cache_capacity.load();
  if (c != 0)
    return c;
  c = envCount("XALLOC_PACKED_CACHE", 8, 1, kMaxCache, "input shapes");
  g_cache_capacity.store(c);
  return c;
}

void setPackedCacheCapacity(std::size_t shapes) {
  TORCH_CHECK(shapes >= 1 && shapes <= kMaxCache, "xalloc: a packed op keeps 1 to ", kMaxCache,
              " input shapes, not ", shapes);
  g_cache_capacity.store(shapes);
}

at::Tensor applyPostOp(const at::Tensor& y, PostOp p) {
  switch (p) {
  case PostOp::None:
    return y;
  case PostOp::Relu:
    return at::relu(y);
  case PostOp::Silu:
    return at::silu(y);
  case PostOp::Hardswish:
    return at::hardswish(y);
  case PostOp::Sigmoid:
    return at::sigmoid(y);
  case PostOp::Gelu:
    return at::gelu(y);
  case PostOp::Relu6:
    return at::hardtanh(y, 0, 6);
  case PostOp::Hardsigmoid:
    return at::hardsigmoid(y);
  case PostOp::Tanh:
    return at::tanh(y);
  }
  return y;
}

namespace {
constexpr const char* kConv = "xalloc::conv2d_packed";

// oneDNN computes relu, clip and the hard sigmoid's clip as max(x, 0) with NaN losing: NaN in,
// a number out, where ATen's activations keep NaN.
[[maybe_unused]] bool eatsNaN(PostOp p) {
  return p == PostOp::Relu || p == PostOp::Relu6 || p == PostOp::Hardsigmoid;
}
constexpr const char* kLinear = "xalloc::linear_packed";

// ATen's checks of a conv2d input (3-D unbatched or 4-D), in ATen's words where they exist.
[[maybe_unused]] void checkConvInput(const at::Tensor& x, const PackedConv& c) {
  detail::checkInput(x, kConv);
  TORCH_CHECK(x.dim() == 4, kConv,
              ": expected a 3-D (unbatched) or 4-D (batched) input, but got "
              "input of size: ",
              x.sizes());
  const auto& w = c.weight.sizes();
  TORCH_CHECK(x.size(1) == w[1] * c.groups, kConv, ": given groups=", c.groups, ", weight of size ",
              w, ", expected input", x.sizes(), " to have ", w[1] * c.groups, " channels, but got ",
              x.size(1), " channels instead");
  TORCH_CHECK(x.size(0) == 0 || (x.size(2) > 0 && x.size(3) > 0), kConv,
              ": only zero batch inputs may be empty, but got input shape: ", x.sizes());
  for (int d = 0; d < 2; ++d) {
    const std::int64_t padded = x.size(2 + d) + 2 * c.padding[d];
    const std::int64_t span = c.dilation[d] * (w[2 + d] - 1) + 1;
    TORCH_CHECK(padded >= span, kConv, ": calculated padded input size per channel: (",
                x.size(2) + 2 * c.padding[0], " x ", x.size(3) + 2 * c.padding[1],
                "). Kernel size: (", c.dilation[0] * (w[2] - 1) + 1, " x ",
                c.dilation[1] * (w[3] - 1) + 1,
                "). Kernel size can't be greater than actual input size");
  }
}

[[maybe_unused]] std::vector<std::int64_t> convOutputSizes(const at::Tensor& x,
                                                           const PackedConv& c) {
  std::vector<std::int64_t> out{x.size(0), c.weight.size(0), 0, 0};
  for (int d = 0; d < 2; ++d)
    out[2 + d] =
        (x.size(2 + d) + 2 * c.padding[d] - c.dilation[d] * (c.weight.size(2 + d) - 1) - 1) /
            c.stride[d] +
        1;
  return out;
}
} // namespace

at::Tensor PackedConv::reference(const at::Tensor& x) const {
  return applyPostOp(
      at::conv2d(x, weight, bias ? *bias : at::Tensor(), stride, padding, dilation, groups), post);
}

at::Tensor PackedConv::referenceAdd(const at::Tensor& x, const at::Tensor& r) const {
  return applyPostOp(
      at::add(at::conv2d(x, weight, bias ? *bias : at::Tensor(), stride, padding, dilation, groups),
              r),
      post);
}

namespace {
constexpr const char* kConvAdd = "xalloc::conv2d_packed_add";
// "add+relu" -> a residual, then relu; "relu" -> relu alone.
struct ConvPost {
  bool residual = false;
  std::string activation;
};
ConvPost splitConvPost(const std::string& post_op) {
  if (post_op == "add")
    return {true, "none"};
  if (post_op.rfind("add+", 0) == 0)
    return {true, post_op.substr(4)};
  return {false, post_op};
}
} // namespace

at::Tensor PackedLinear::reference(const at::Tensor& x) const {
  return applyPostOp(at::linear(x, weight, bias ? *bias : at::Tensor()), post);
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

// The activation's post-ops, after a sum when the output holds a residual to add. A sum, not a
// binary add reading the residual where it is: with a binary post-op oneDNN 2.6 leaves its
// brgemm convolutions for older kernels, 8-28% slower on AVX-512 (ResNet's 3x3 convolutions).
dnnl::post_ops postOps(PostOp p, bool residual) {
  using A = dnnl::algorithm;
  dnnl::post_ops po;
  if (residual)
    po.append_sum(1.f);
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

// Every primitive is made for a scratchpad the caller passes (never the library's own, which
// Debian's build shares between the threads that run one primitive).
dnnl::primitive_attr userScratchpad(PostOp p, bool residual = false) {
  dnnl::primitive_attr attr;
  attr.set_post_ops(postOps(p, residual));
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void execute(const dnnl::primitive& prim, const dnnl::memory::desc& scratch,
             std::unordered_map<int, dnnl::memory> args) {
  const std::size_t bytes = scratch.get_size();
  if (bytes > 0)
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(scratch, engine(), detail::threadScratch(bytes)));
  prim.execute(stream(), args);
  stream().wait();
}

// The dense weight `plain_md` (data at `data`) packed into `packed_md` once.
dnnl::memory packInto(const dnnl::memory::desc& plain_md, void* data,
                      const dnnl::memory::desc& packed_md) {
  dnnl::memory plain(plain_md, engine(), data);
  dnnl::memory packed(packed_md, engine());
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::reorder::primitive_desc pd(plain, packed, attr);
  execute(dnnl::reorder(pd), pd.scratchpad_desc(), {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, packed}});
  return packed;
}

// The packed copy among `list` whose layout is `md`, or a new one `make()` packs (and `list`
// pruned of copies no cached shape uses any more).
template <class W, class Make>
std::shared_ptr<W> sharedWeights(std::mutex& m, std::vector<std::weak_ptr<W>>& list,
                                 const dnnl::memory::desc& md, Make make) {
  std::lock_guard<std::mutex> lock(m);
  list.erase(std::remove_if(list.begin(), list.end(), [](const auto& w) { return w.expired(); }),
             list.end());
  for (const auto& w : list)
    if (auto s = w.lock(); s && s->mem.get_desc() == md)
      return s;
  auto s = std::make_shared<W>(W{make()});
  list.push_back(s);
  return s;
}

// The prepared primitive of a conv or linear on x, into out (its bias, if any, as it is stored;
// out holds the residual its sum post-op adds, when it has one).
template <class Prepared>
void runPrepared(const Prepared& p, const at::Tensor& x, const at::Tensor& out,
                 const c10::optional<at::Tensor>& bias) {
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(p.src, engine(), x.data_ptr())},
      {DNNL_ARG_WEIGHTS, p.weights->mem},
      {DNNL_ARG_DST, dnnl::memory(p.dst, engine(), out.data_ptr())}};
  if (bias)
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(p.bias, engine(), bias->data_ptr()));
  execute(p.primitive, p.scratch, std::move(args));
}

template <class W> std::size_t liveCount(std::mutex& m, const std::vector<std::weak_ptr<W>>& l) {
  std::lock_guard<std::mutex> lock(m);
  return static_cast<std::size_t>(
      std::count_if(l.begin(), l.end(), [](const auto& w) { return !w.expired(); }));
}

} // namespace

struct PackedWeights {
  dnnl::memory mem; // packed, owned by oneDNN
};

struct PackedConv::Prepared {
  std::vector<std::int64_t> output_sizes;
  dnnl::convolution_forward primitive;
  dnnl::memory::desc src, dst, bias, scratch;
  std::shared_ptr<PackedWeights> weights;
};

std::shared_ptr<const PackedConv::Prepared> PackedConv::prepare(const at::Tensor& x) {
  std::vector<std::int64_t> key = x.sizes().vec();
  if (auto p = cache_.find(key))
    return p;
  using dnnl::memory;
  const auto& w = weight.sizes();
  const std::int64_t oc = w[0], kh = w[2], kw = w[3];
  auto p = std::make_shared<Prepared>();
  p->output_sizes = convOutputSizes(x, *this);
  const auto f32 = memory::data_type::f32;
  p->src = memory::desc(key, f32, memory::format_tag::nhwc);
  p->dst = memory::desc(p->output_sizes, f32, memory::format_tag::nhwc);
  const memory::dims wdims =
      groups > 1 ? memory::dims{groups, oc / groups, w[1], kh, kw} : memory::dims{oc, w[1], kh, kw};
  const memory::desc w_any(wdims, f32, memory::format_tag::any);
  p->bias = memory::desc({oc}, f32, memory::format_tag::x);
  const memory::dims strides{stride[0], stride[1]};
  const memory::dims dil{dilation[0] - 1, dilation[1] - 1};
  const memory::dims pad{padding[0], padding[1]};
  const auto desc =
      bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, p->src, w_any,
                                             p->bias, p->dst, strides, dil, pad, pad)
           : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, p->src, w_any,
                                             p->dst, strides, dil, pad, pad);
  const dnnl::convolution_forward::primitive_desc pd(desc, userScratchpad(post, residual),
                                                     engine());
  p->primitive = dnnl::convolution_forward(pd);
  p->scratch = pd.scratchpad_desc();
  const memory::desc plain(wdims, f32,
                           groups > 1 ? memory::format_tag::goihw : memory::format_tag::oihw);
  p->weights = sharedWeights(weights_mutex_, weights_, pd.weights_desc(),
                             [&] { return packInto(plain, weight.data_ptr(), pd.weights_desc()); });
  return cache_.insert(std::move(key), std::move(p));
}

at::Tensor PackedConv::run(const at::Tensor& x_in) {
  TORCH_CHECK(!residual, kConv, ": this packed convolution adds a residual (its post-op is '",
              std::get<6>(state()), "'): call ", kConvAdd);
  return runChecked(x_in, nullptr);
}

at::Tensor PackedConv::runAdd(const at::Tensor& x_in, const at::Tensor& r) {
  TORCH_CHECK(residual, kConvAdd, ": this packed convolution adds no residual (its post-op is '",
              postOpName(post), "'): call ", kConv);
  return runChecked(x_in, &r);
}

at::Tensor PackedConv::runChecked(const at::Tensor& x_in, const at::Tensor* r_in) {
  detail::checkOnCpu(weight, "xalloc.PackedConv", "weight");
  if (x_in.defined() && x_in.dim() == 3) {
    // Unbatched: the residual as ATen would broadcast it against the unbatched output.
    if (!r_in)
      return runChecked(x_in.unsqueeze(0), nullptr).squeeze(0);
    return referenceAdd(x_in, *r_in);
  }
  checkConvInput(x_in, *this);
  const at::Tensor x = x_in.contiguous(at::MemoryFormat::ChannelsLast);
  const std::vector<std::int64_t> out_sizes = convOutputSizes(x, *this);
  if (r_in) {
    // Only a residual the add would not broadcast or promote is fused; any other is ATen's.
    const at::Tensor& r = *r_in;
    if (!r.defined() || r.layout() != at::kStrided || !r.device().is_cpu() ||
        r.scalar_type() != at::kFloat || r.sizes() != at::IntArrayRef(out_sizes) ||
        detail::wantsGradient(r) || x.size(0) == 0)
      return referenceAdd(x_in, r);
  }
  if (x.size(0) == 0)
    return at::empty(out_sizes, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  if (detail::needsReference(x, eatsNaN(post), bounds_))
    return r_in ? referenceAdd(x_in, *r_in) : reference(x_in);
  const auto p = prepare(x);
  at::Tensor out =
      at::empty(p->output_sizes, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  if (r_in) {
    out.copy_(*r_in); // the sum post-op adds the convolution to what the output holds
    // A residual that is not finite meets an activation that turns NaN into a number.
    if (eatsNaN(post) && !scanFloats(out.data_ptr<float>(), out.numel()).finite)
      return referenceAdd(x_in, *r_in);
  }
  runPrepared(*p, x, out, bias);
  return out;
}

std::size_t PackedConv::packedWeights() const {
  return liveCount(weights_mutex_, weights_);
}

struct PackedLinear::Prepared {
  dnnl::inner_product_forward primitive;
  dnnl::memory::desc src, dst, bias, scratch;
  std::shared_ptr<PackedWeights> weights;
};

std::shared_ptr<const PackedLinear::Prepared> PackedLinear::prepare(std::int64_t rows) {
  if (auto p = cache_.find(rows))
    return p;
  using dnnl::memory;
  const std::int64_t out = weight.size(0), in = weight.size(1);
  auto p = std::make_shared<Prepared>();
  const auto f32 = memory::data_type::f32;
  p->src = memory::desc({rows, in}, f32, memory::format_tag::nc);
  p->dst = memory::desc({rows, out}, f32, memory::format_tag::nc);
  const memory::desc w_any({out, in}, f32, memory::format_tag::any);
  p->bias = memory::desc({out}, f32, memory::format_tag::x);
  const auto desc = bias ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference,
                                                             p->src, w_any, p->bias, p->dst)
                         : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference,
                                                             p->src, w_any, p->dst);
  const dnnl::inner_product_forward::primitive_desc pd(desc, userScratchpad(post), engine());
  p->primitive = dnnl::inner_product_forward(pd);
  p->scratch = pd.scratchpad_desc();
  p->weights = sharedWeights(weights_mutex_, weights_, pd.weights_desc(), [&] {
    return packInto(memory::desc({out, in}, f32, memory::format_tag::oi), weight.data_ptr(),
                    pd.weights_desc());
  });
  return cache_.insert(rows, std::move(p));
}

at::Tensor PackedLinear::run(const at::Tensor& x_in) {
  detail::checkOnCpu(weight, "xalloc.PackedLinear", "weight");
  detail::checkInput(x_in, kLinear);
  TORCH_CHECK(x_in.dim() >= 1, kLinear,
              ": both arguments to linear need to be at least 1D, but they are ", x_in.dim(),
              "D and 2D");
  const std::int64_t in = weight.size(1), outs = weight.size(0);
  TORCH_CHECK(x_in.size(-1) == in, kLinear, ": mat1 and mat2 shapes cannot be multiplied (",
              x_in.numel() / std::max<std::int64_t>(x_in.size(-1), 1), "x", x_in.size(-1), " and ",
              in, "x", outs, ")");
  const at::Tensor x = x_in.contiguous();
  const std::int64_t rows = in == 0 ? 0 : x.numel() / in;
  // No features: ATen's result is the bias (then the activation); no rows: an empty result.
  if (in == 0 || rows == 0 || outs == 0 || detail::needsReference(x, eatsNaN(post), bounds_))
    return reference(x_in);
  const auto p = prepare(rows);
  std::vector<std::int64_t> sizes = x.sizes().vec();
  sizes.back() = outs;
  at::Tensor out = at::empty(sizes, x.options());
  runPrepared(*p, x, out, bias);
  return out;
}

std::size_t PackedLinear::packedWeights() const {
  return liveCount(weights_mutex_, weights_);
}

#else

bool hasPackedConv() {
  return false;
}
struct PackedWeights {};
struct PackedConv::Prepared {};
struct PackedLinear::Prepared {};
at::Tensor PackedConv::run(const at::Tensor&) {
  TORCH_CHECK(false, kConv, ": this runtime was built without oneDNN");
}
at::Tensor PackedConv::runAdd(const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, kConvAdd, ": this runtime was built without oneDNN");
}
at::Tensor PackedConv::runChecked(const at::Tensor&, const at::Tensor*) {
  TORCH_CHECK(false, kConv, ": this runtime was built without oneDNN");
}
at::Tensor PackedLinear::run(const at::Tensor&) {
  TORCH_CHECK(false, kLinear, ": this runtime was built without oneDNN");
}
std::size_t PackedConv::packedWeights() const {
  return 0;
}
std::size_t PackedLinear::packedWeights() const {
  return 0;
}

#endif

std::size_t PackedConv::preparedShapes() const {
  return cache_.size();
}
std::size_t PackedLinear::preparedShapes() const {
  return cache_.size();
}

PackedConv::PackedConv(at::Tensor weight_in, c10::optional<at::Tensor> bias_in,
                       std::vector<std::int64_t> stride_in, std::vector<std::int64_t> padding_in,
                       std::vector<std::int64_t> dilation_in, std::int64_t groups_in,
                       std::string post_op)
    : weight(std::move(weight_in)), bias(std::move(bias_in)), stride(std::move(stride_in)),
      padding(std::move(padding_in)), dilation(std::move(dilation_in)), groups(groups_in),
      cache_(packedCacheCapacity()) {
  constexpr const char* who = "xalloc.PackedConv";
  detail::checkStoredTensor(weight, who, "weight");
  TORCH_CHECK(weight.dim() == 4, who, ": needs a 4-D weight (out, in/groups, kh, kw), got ",
              weight.sizes());
  for (std::int64_t d = 0; d < 4; ++d)
    TORCH_CHECK(weight.size(d) >= 1, who, ": the weight has an empty dimension: ", weight.sizes());
  detail::checkConvParams(who, stride, padding, dilation, groups, weight.size(0));
  const ConvPost split = splitConvPost(post_op);
  residual = split.residual;
  post = detail::checkBiasAndPostOp(who, weight, bias, split.activation);
  bounds_ = detail::sumBounds(weight, bias);
}

PackedConv::~PackedConv() = default;

PackedConv::State PackedConv::state() const {
  std::string p = postOpName(post);
  if (residual)
    p = post == PostOp::None ? "add" : "add+" + p;
  return {weight, bias, stride, padding, dilation, groups, p};
}

PackedLinear::PackedLinear(at::Tensor weight_in, c10::optional<at::Tensor> bias_in,
                           std::string post_op)
    : weight(std::move(weight_in)), bias(std::move(bias_in)), cache_(packedCacheCapacity()) {
  constexpr const char* who = "xalloc.PackedLinear";
  detail::checkStoredTensor(weight, who, "weight");
  TORCH_CHECK(weight.dim() == 2, who, ": needs a 2-D weight (out, in), got ", weight.sizes());
  post = detail::checkBiasAndPostOp(who, weight, bias, post_op);
  bounds_ = detail::sumBounds(weight, bias);
}

PackedLinear::~PackedLinear() = default;

PackedLinear::State PackedLinear::state() const {
  return {weight, bias, postOpName(post)};
}

} // namespace xalloc::runtime
