// xalloc::conv2d_packed and xalloc::conv2d_packed_add: frozen convolutions whose weights oneDNN
// packs once per input shape (a bounded LRU of shapes; shapes whose kernels read the same packed
// layout share one copy of the weight), with the activation after them fused, and a residual
// added in the same pass (packed.h). Each call runs the shared primitive with a scratchpad of
// its own thread, so any number of threads may call one op at once.
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "channels_last.h"
#include "finite_scan.h"
#include "packed_checks.h"
#include "xalloc/runtime/packed.h"

#ifdef XALLOC_WITH_DNNL
#include "packed_dnnl.h"
#endif

namespace xalloc::runtime {

namespace {
constexpr const char* kConv = "xalloc::conv2d_packed";

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

at::Tensor PackedConv::atenConv(const at::Tensor& x) const {
  return at::conv2d(x, weight, bias ? *bias : at::Tensor(), stride, padding, dilation, groups);
}

at::Tensor PackedConv::reference(const at::Tensor& x) const {
  return applyPostOp(atenConv(x), post);
}

at::Tensor PackedConv::referenceAdd(const at::Tensor& x, const at::Tensor& r) const {
  return applyPostOp(at::add(atenConv(x), r), post);
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

#ifdef XALLOC_WITH_DNNL

using namespace detail;

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
  const at::Tensor x = toChannelsLast(x_in);
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
  if (detail::needsReference(x, detail::eatsNaN(post), bounds_))
    return r_in ? referenceAdd(x_in, *r_in) : reference(x_in);
  const auto p = prepare(x);
  at::Tensor out =
      at::empty(p->output_sizes, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  if (r_in) {
    out.copy_(*r_in); // the sum post-op adds the convolution to what the output holds
    // A residual that is not finite meets an activation that turns NaN into a number.
    if (detail::eatsNaN(post) && !scanFloats(out.data_ptr<float>(), out.numel()).finite)
      return referenceAdd(x_in, *r_in);
  }
  runPrepared(*p, x, out, bias);
  finishPostOp(post, out);
  return out;
}

std::size_t PackedConv::packedWeights() const {
  return liveCount(weights_mutex_, weights_);
}

#else

struct PackedConv::Prepared {};
at::Tensor PackedConv::run(const at::Tensor&) {
  TORCH_CHECK(false, kConv, ": this runtime was built without oneDNN");
}
at::Tensor PackedConv::runAdd(const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, kConvAdd, ": this runtime was built without oneDNN");
}
at::Tensor PackedConv::runChecked(const at::Tensor&, const at::Tensor*) {
  TORCH_CHECK(false, kConv, ": this runtime was built without oneDNN");
}
std::size_t PackedConv::packedWeights() const {
  return 0;
}

#endif

std::size_t PackedConv::preparedShapes() const {
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

} // namespace xalloc::runtime
