// xalloc::conv2d_packed, xalloc::conv3d_packed and their _add forms: frozen 2-D and 3-D
// convolutions whose weights oneDNN packs once per input shape (a bounded LRU of shapes; shapes
// whose kernels read the same packed layout share one copy of the weight), with the activation
// after them fused, and a residual added in the same pass (packed.h). Activations are
// channels-last (NHWC, NDHWC). Each call runs the shared primitive with a scratchpad of its own
// thread, so any number of threads may call one op at once.
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "channels_last.h"
#include "depthwise_nhwc.h"
#include "epilogue.h"
#include "finite_scan.h"
#include "grouped_nhwc.h"
#include "packed_checks.h"
#include "xalloc/runtime/packed.h"

#include "packed_onednn.h"

namespace xalloc::runtime {

namespace {
const char* convOpName(std::int64_t dims, bool add) {
  if (dims == 3)
    return add ? "xalloc::conv3d_packed_add" : "xalloc::conv3d_packed";
  return add ? "xalloc::conv2d_packed_add" : "xalloc::conv2d_packed";
}

at::MemoryFormat channelsLastOf(std::int64_t dims) {
  return dims == 3 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
}

// ATen's checks of a convolution's input (unbatched or batched), in ATen's words where they
// exist; `dims` spatial dimensions.
void checkConvInput(const at::Tensor& x, const PackedConv& c) {
  const std::int64_t dims = c.spatialDims();
  const char* who = convOpName(dims, c.residual);
  detail::checkInput(x, who);
  TORCH_CHECK(x.dim() == dims + 2, who, ": expected a ", dims + 1, "-D (unbatched) or ", dims + 2,
              "-D (batched) input, but got input of size: ", x.sizes());
  const auto& w = c.weight.sizes();
  TORCH_CHECK(x.size(1) == w[1] * c.groups, who, ": given groups=", c.groups, ", weight of size ",
              w, ", expected input", x.sizes(), " to have ", w[1] * c.groups, " channels, but got ",
              x.size(1), " channels instead");
  bool empty = false;
  for (std::int64_t d = 0; d < dims; ++d)
    empty = empty || x.size(2 + d) == 0;
  TORCH_CHECK(x.size(0) == 0 || !empty, who,
              ": only zero batch inputs may be empty, but got input shape: ", x.sizes());
  for (std::int64_t d = 0; d < dims; ++d) {
    const std::int64_t padded = x.size(2 + d) + 2 * c.padding[d];
    const std::int64_t span = c.dilation[d] * (w[2 + d] - 1) + 1;
    TORCH_CHECK(padded >= span, who, ": calculated padded input size per channel in dimension ", d,
                ": ", padded, ". Kernel size: ", span,
                ". Kernel size can't be greater than actual input size");
  }
}

std::vector<std::int64_t> convOutputSizes(const at::Tensor& x, const PackedConv& c) {
  const std::int64_t dims = c.spatialDims();
  std::vector<std::int64_t> out{x.size(0), c.weight.size(0)};
  for (std::int64_t d = 0; d < dims; ++d)
    out.push_back(
        (x.size(2 + d) + 2 * c.padding[d] - c.dilation[d] * (c.weight.size(2 + d) - 1) - 1) /
            c.stride[d] +
        1);
  return out;
}
} // namespace

at::Tensor PackedConv::atenConv(const at::Tensor& x) const {
  const at::Tensor b = bias ? *bias : at::Tensor();
  if (spatialDims() == 3)
    return at::conv3d(x, weight, b, stride, padding, dilation, groups);
  return at::conv2d(x, weight, b, stride, padding, dilation, groups);
}

std::int64_t PackedConv::spatialDims() const {
  return weight.dim() - 2;
}

bool PackedConv::depthwise() const {
  return spatialDims() == 2 && groups > 1 && groups == weight.size(0) && weight.size(1) == 1;
}

bool PackedConv::pointwise() const {
  bool one = groups == 1;
  for (std::int64_t d = 0; d < spatialDims(); ++d)
    one = one && weight.size(2 + d) == 1 && stride[d] == 1 && padding[d] == 0;
  return one;
}

void PackedConv::checkCalledAs(std::int64_t dims, bool add) const {
  TORCH_CHECK(spatialDims() == dims, convOpName(dims, add), ": this packed convolution is ",
              spatialDims(), "-D (a weight of sizes ", weight.sizes(), "): call ",
              convOpName(spatialDims(), add));
}

at::Tensor PackedConv::reference(const at::Tensor& x) const {
  return applyPostOp(atenConv(x), post);
}

at::Tensor PackedConv::referenceAdd(const at::Tensor& x, const at::Tensor& r) const {
  return applyPostOp(at::add(atenConv(x), r), post);
}

namespace {
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

using namespace detail;

struct PackedConv::Prepared {
  std::vector<std::int64_t> output_sizes;
  std::shared_ptr<PackedWeights> weights; // none for a pointwise or depthwise one
  at::Tensor gemm_weight;    // a 1x1 convolution of stride 1: its weight as [out, in], one GEMM
  at::Tensor dw_weight;      // a depthwise one: its weight as [kh * kw, channels] (depthwise_nhwc)
  at::Tensor kernel_bias;    // a depthwise or grouped one's bias, contiguous (none without one)
  at::Tensor grouped_weight; // a grouped one of 8k outputs a group: groupedNhwcWeight's layout
  int threads = 1;           // of the caller's, the ones its kernel runs on
};

std::shared_ptr<const PackedConv::Prepared> PackedConv::prepare(const at::Tensor& x) {
  // One per thread count, so that set_num_threads(1) is honoured, and a forked child at one
  // thread never enters the parent's OpenMP team (GNU OpenMP hangs there).
  std::vector<std::int64_t> key = x.sizes().vec();
  key.push_back(at::get_num_threads());
  if (auto p = cache_.find(key))
    return p;
  if (!cache_.admits(key))
    return nullptr; // a shape rarer than those prepared: ATen's op this time
  auto p = std::make_shared<Prepared>();
  p->output_sizes = convOutputSizes(x, *this);
  const double flops = static_cast<double>(c10::multiply_integers(p->output_sizes)) *
                       static_cast<double>(weight.numel() / weight.size(0));
  p->threads = packedThreads(flops, at::get_num_threads());
  if (pointwise()) {
    // A channels-last 1x1 convolution of stride 1 is one product of [pixels, in] by [in, out]:
    // libtorch's BLAS, without the ~60 us oneDNN's op spends on its descriptor at every call.
    // Measured at one thread (torch 2.14.1, AVX2): MobileNetV3's 16->72 at 28x28, 80 against
    // 144 us; ResNet-50's 64->256 at 56x56, 1.66 against 3.16 ms (256->64: 1.89 against 1.75).
    p->gemm_weight = weight.reshape({weight.size(0), weight.size(1)}).contiguous();
    return cache_.insert(std::move(key), std::move(p));
  }
  if (depthwise()) {
    // One filter per channel: the runtime's kernel (depthwise_nhwc.cpp), 10-40 us where
    // libtorch's op takes 70-150 for MobileNetV3-Small's.
    p->dw_weight = weight.reshape({weight.size(0), -1}).t().contiguous();
    if (bias)
      p->kernel_bias = bias->contiguous();
    return cache_.insert(std::move(key), std::move(p));
  }
  if (spatialDims() == 2 && groupedNhwcTakes(groups, weight.size(1), weight.size(0) / groups)) {
    // Groups of eight output channels or more, or a first convolution of RGB pixels: the
    // runtime's kernel (grouped_nhwc.cpp). RegNetY-400MF's 3x3s of eight channels a group took
    // 0.2-0.5 ms each in libtorch's op at one thread, MobileNetV3's 3->16 stem 0.47.
    p->grouped_weight = groupedNhwcWeight(weight, groups);
    if (bias)
      p->kernel_bias = bias->contiguous();
    return cache_.insert(std::move(key), std::move(p));
  }
  const OmpThreads team(p->threads);
  // The weight packed once for this input shape: libtorch 2.x reorders 3-D convolutions' too
  // (1.13 took only 2-D ones). Measured at one thread (torch 2.14.1, AVX2): R3D-18's 512->512
  // 3x3x3 at 2x7x7, 50.6 ms with the dense weight oneDNN packs at every call, 14.5 packed.
  at::Tensor packed = reorderConvWeight(weight, padding, stride, dilation, groups, x.sizes());
  p->weights = sharedWeights(weights_mutex_, weights_, std::move(packed));
  return cache_.insert(std::move(key), std::move(p));
}

at::Tensor PackedConv::run(const at::Tensor& x_in) {
  TORCH_CHECK(!residual, convOpName(spatialDims(), false),
              ": this packed convolution adds a residual (its post-op is '", std::get<6>(state()),
              "'): call ", convOpName(spatialDims(), true));
  return runChecked(x_in, nullptr);
}

at::Tensor PackedConv::runAdd(const at::Tensor& x_in, const at::Tensor& r) {
  TORCH_CHECK(residual, convOpName(spatialDims(), true),
              ": this packed convolution adds no residual (its post-op is '", postOpName(post),
              "'): call ", convOpName(spatialDims(), false));
  return runChecked(x_in, &r);
}

at::Tensor PackedConv::runAddInto(const at::Tensor& x_in, at::Tensor&& r) {
  TORCH_CHECK(residual, convOpName(spatialDims(), true),
              ": this packed convolution adds no residual (its post-op is '", postOpName(post),
              "'): call ", convOpName(spatialDims(), false));
  // Held by no one else, the convolution may add into it where ATen's add would have made a
  // new tensor.
  const bool alone = detail::ownedAlone(r);
  const at::Tensor held = std::move(r);
  return runChecked(x_in, &held, alone);
}

at::Tensor PackedConv::runChecked(const at::Tensor& x_in, const at::Tensor* r_in,
                                  bool write_residual) {
  detail::checkOnCpu(weight, "xalloc.PackedConv", "weight");
  if (x_in.defined() && x_in.dim() == spatialDims() + 1) {
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
  const at::MemoryFormat cl = channelsLastOf(spatialDims());
  if (x.size(0) == 0)
    return at::empty(out_sizes, x.options().memory_format(cl));
  double in_bound = 0; // the largest |x|, when known (noted by the op that made x, or scanned)
  if (detail::needsReference(x, post, bounds_, &in_bound))
    return r_in ? referenceAdd(x_in, *r_in) : reference(x_in);
  const auto p = prepare(x);
  if (!p)
    return r_in ? referenceAdd(x_in, *r_in) : reference(x_in);
  // The residual's largest |r|, when noted (read before the output may take its place).
  constexpr double kUnknown = std::numeric_limits<double>::infinity();
  const double r_noted = r_in ? detail::knownBound(*r_in).value_or(kUnknown) : kUnknown;
  at::Tensor out;
  if (r_in && write_residual && r_in->is_contiguous(cl)) {
    out = *r_in; // the sum post-op adds the convolution to what the output holds: here, in place
    detail::markWritten(out);
  } else if (r_in) {
    out = at::empty(p->output_sizes, x.options().memory_format(cl));
    out.copy_(*r_in);
  }
  double sum_bound = in_bound * bounds_.weights + bounds_.bias;
  if (r_in) {
    // A residual that is not finite meets an activation that turns NaN into a number; one so
    // large that the sum could pass where ATen's hardswish overflows (5.67e37; the
    // convolution's part is below 5e37) gets ATen's ops. A noted residual is not scanned.
    const bool scan = detail::eatsNaN(post) || post == PostOp::Hardswish;
    double r_max = kUnknown;
    if (r_noted < kUnknown && (post != PostOp::Hardswish || r_noted < 5e36)) {
      r_max = r_noted;
    } else if (scan) { // not noted, or noted too large for hardswish: the real largest
      const FloatScan s = scanFloats(out.data_ptr<float>(), out.numel());
      if (!s.finite)
        return referenceAdd(x_in, *r_in);
      r_max = s.max_abs;
    }
    if (post == PostOp::Hardswish && !(r_max < 5e36))
      return referenceAdd(x_in, *r_in);
    sum_bound += r_max;
  }
  if (p->gemm_weight.defined() || p->dw_weight.defined() || p->grouped_weight.defined()) {
    // x and the output channels-last: [pixels, channels] row-major, viewed in place. Without a
    // residual the kernel's epilogue applies the activation as it writes each block of rows.
    const PostOp fused = r_in ? PostOp::None : post;
    bool activated = true;
    at::Tensor y = at::empty(p->output_sizes, x.options().memory_format(cl));
    if (p->gemm_weight.defined()) {
      at::Tensor y2d = y.movedim(1, -1).view({-1, y.size(1)});
      gemmPointwise(y2d, x.movedim(1, -1).reshape({-1, x.size(1)}), p->gemm_weight, bias, fused);
    } else {
      // The runtime's direct kernels read x as NHWC: a view of x where it is channels-last.
      const auto act = epilogueActivation(kernelPostOp(fused));
      activated = act.has_value();
      const at::Tensor xc = x.movedim(1, -1).contiguous();
      const float* kernel_bias =
          p->kernel_bias.defined() ? p->kernel_bias.data_ptr<float>() : nullptr;
      if (p->grouped_weight.defined()) {
        const Grouped2d g{.h = x.size(2),
                          .w = x.size(3),
                          .groups = groups,
                          .ci = weight.size(1),
                          .co = weight.size(0) / groups,
                          .kh = weight.size(2),
                          .kw = weight.size(3),
                          .sh = stride[0],
                          .sw = stride[1],
                          .ph = padding[0],
                          .pw = padding[1],
                          .dh = dilation[0],
                          .dw = dilation[1],
                          .oh = p->output_sizes[2],
                          .ow = p->output_sizes[3],
                          .in = xc.data_ptr<float>(),
                          .weight = p->grouped_weight.data_ptr<float>(),
                          .bias = kernel_bias,
                          .out = y.data_ptr<float>(),
                          .act = act.value_or(Activation::None)};
        groupedNhwc(g, x.size(0), p->threads);
      } else {
        const Depthwise2d d{.h = x.size(2),
                            .w = x.size(3),
                            .c = x.size(1),
                            .kh = weight.size(2),
                            .kw = weight.size(3),
                            .sh = stride[0],
                            .sw = stride[1],
                            .ph = padding[0],
                            .pw = padding[1],
                            .dh = dilation[0],
                            .dw = dilation[1],
                            .oh = p->output_sizes[2],
                            .ow = p->output_sizes[3],
                            .in = xc.data_ptr<float>(),
                            .weight = p->dw_weight.data_ptr<float>(),
                            .bias = kernel_bias,
                            .out = y.data_ptr<float>(),
                            .act = act.value_or(Activation::None)};
        depthwiseNhwc(d, x.size(0), p->threads);
      }
    }
    if (r_in) {
      out.add_(y); // conv(x) + r as ATen's add rounds it
      activateInPlace(out, post);
    } else {
      out = std::move(y);
      if (!activated)
        activateInPlace(out, post);
    }
  } else {
    const OmpThreads team(p->threads);
    if (r_in)
      convPointwiseAddInto(out, x, p->weights->packed, bias, padding, stride, dilation, groups,
                           post);
    else
      out = convPointwise(x, p->weights->packed, bias, padding, stride, dilation, groups, post);
  }
  TORCH_CHECK(out.sizes() == at::IntArrayRef(p->output_sizes) && out.is_contiguous(cl),
              convOpName(spatialDims(), residual),
              ": libtorch's oneDNN convolution gave an output of sizes ", out.sizes(),
              " where one of ", at::IntArrayRef(p->output_sizes), ", channels-last, was expected");
  finishPostOp(post, out);
  // Every element of the output is at most this (a float sum in any order rounds within 1%),
  // or the note is forgotten (an output that took the residual's place keeps no old note).
  detail::noteBound(out, detail::postOpBound(post, sum_bound * 1.01));
  return out;
}

std::size_t PackedConv::packedWeights() const {
  return liveCount(weights_mutex_, weights_);
}

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
  TORCH_CHECK(weight.dim() == 4 || weight.dim() == 5, who,
              ": needs a 4-D weight (out, in/groups, kh, kw) or a 5-D one (out, in/groups, kd, kh, "
              "kw), got ",
              weight.sizes());
  for (std::int64_t d = 0; d < weight.dim(); ++d)
    TORCH_CHECK(weight.size(d) >= 1, who, ": the weight has an empty dimension: ", weight.sizes());
  detail::checkConvParams(who, stride, padding, dilation, groups, weight.size(0),
                          static_cast<std::size_t>(weight.dim() - 2));
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
