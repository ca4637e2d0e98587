// xalloc::squeeze_excite: a squeeze-and-excitation block of a packed region as one op, as
// xrewrite writes it (tspass::fuseSqueezeExcite): `x * expand(reduce(adaptive_avg_pool2d(x, 1)))`
// with both 1x1 convolutions packed (their activations fused as post-ops: relu or SiLU, then
// hardsigmoid or sigmoid). ATen ran the pooling as a channels-last mean (sum, divide, a copy
// into channels-last) and the scaling as a broadcast mul: five ops and two intra-op parallel
// regions for a few microseconds of work, 12% of MobileNetV3-Small's time at one thread and
// more at two, where each region costs its threads' start; and each 1x1 convolution of one
// pixel cost ~10 us of a packed call's set-up for under a microsecond of arithmetic. Here the
// channel sums, the two convolutions (a matrix-vector product each, the bias added, then the
// activation by ATen's formula on the few values) and the scaling run in one call, the pooling and
// the scaling on the caller's threads only when the work pays for them.
//
// Values: each convolution's output is its bias plus the products summed over the input
// channels in one order, as any float convolution (not oneDNN's order: within the tolerance the
// fast form is verified to, as its packed convolutions are); each channel's sum is a float sum over
// its pixels (in blocks of 64, as ATen's cascade keeps its error small), divided by the pixel count
// as ATen's mean does; the result is x times the scale, the one multiply ATen's mul makes (bit for
// bit, given the scale). A sum that overflows is inf, NaN stays NaN, as in ATen's float sum.
// Anything else (other dtypes, layouts or ranks, an input that wants gradients, an empty one) runs
// the original ops: ATen's pooling, the packed convolutions, ATen's mul, with their errors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "dispatch.h"
#include "packed_checks.h"
#include "xalloc/runtime/packed.h"

namespace xalloc::runtime {

namespace {

constexpr std::int64_t kBlock = 64; // pixels summed before their sum joins the total
// Elements a thread's share is worth. Alone, on data in its own core's cache, a multiply over
// 40K floats took 3.2 us on one thread and 8 on two on this 2-core VM. But the block's input
// comes from a convolution that ran on both cores, half of it in the other core's cache: after
// one, the block over 240 x 28 x 28 values took 60 us at one thread, 105 on the caller's
// thread alone at two, and 65-75 split between the two (16 x 56 x 56: 50 and 45; 96 x 14 x 14,
// whose convolution ran on one thread: 27 alone, 49 split). Split past 32K values.
constexpr std::int64_t kGrain = 32 << 10;
// Weights a thread's share of a block's matrix-vector product is worth: the weight is read from
// memory (a block's last read it a layer ago), at two threads MobileNetV3-Small's nine blocks
// spent ~100 us a call in the products on one core.
constexpr std::int64_t kMatVecGrain = 16 << 10;

// Channels [c0, c1) of one image's `pixels` x `c` channels-last values summed into sum[c0..c1).
__attribute__((always_inline)) inline void channelSumsOf(const float* x, std::int64_t pixels,
                                                         std::int64_t c, std::int64_t c0,
                                                         std::int64_t c1, float* sum,
                                                         float* block) {
  std::fill(sum + c0, sum + c1, 0.f);
  for (std::int64_t p0 = 0; p0 < pixels; p0 += kBlock) {
    const std::int64_t p1 = std::min(pixels, p0 + kBlock);
    std::fill(block + c0, block + c1, 0.f);
    for (std::int64_t p = p0; p < p1; ++p) {
      const float* row = x + p * c;
      for (std::int64_t j = c0; j < c1; ++j)
        block[j] += row[j];
    }
    for (std::int64_t j = c0; j < c1; ++j)
      sum[j] += block[j];
  }
}

// Pixels [p0, p1) of one image: out = x * s, channel by channel.
__attribute__((always_inline)) inline void scalePixelsOf(const float* x, const float* s, float* out,
                                                         std::int64_t c, std::int64_t p0,
                                                         std::int64_t p1) {
  for (std::int64_t p = p0; p < p1; ++p) {
    const float* row = x + p * c;
    float* o = out + p * c;
    for (std::int64_t j = 0; j < c; ++j)
      o[j] = s[j] * row[j];
  }
}

// Rows [r0, r1) of w (rows x c, dense) times v, plus the bias (or nothing).
__attribute__((always_inline)) inline void matVecOf(const float* w, const float* v,
                                                    const float* bias, float* out, std::int64_t c,
                                                    std::int64_t r0, std::int64_t r1) {
  constexpr std::int64_t kLanes = 16; // partial sums a vector register holds
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* row = w + r * c;
    float lanes[kLanes] = {};
    std::int64_t j = 0;
    for (; j + kLanes <= c; j += kLanes)
      for (std::int64_t l = 0; l < kLanes; ++l)
        lanes[l] += row[j + l] * v[j + l];
    for (std::int64_t l = 0; j + l < c; ++l)
      lanes[l] += row[j + l] * v[j + l];
    float acc = 0.f;
    for (float part : lanes)
      acc += part;
    out[r] = bias ? acc + bias[r] : acc;
  }
}

} // namespace

// The variants of kernels.def's rows (AVX-512F and the baseline), each the body above.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) void channelSumsAvx512(const float* x, std::int64_t pixels,
                                                          std::int64_t c, std::int64_t c0,
                                                          std::int64_t c1, float* sum,
                                                          float* block) {
  channelSumsOf(x, pixels, c, c0, c1, sum, block);
}
__attribute__((target("avx512f"))) void scalePixelsAvx512(const float* x, const float* s,
                                                          float* out, std::int64_t c,
                                                          std::int64_t p0, std::int64_t p1) {
  scalePixelsOf(x, s, out, c, p0, p1);
}
__attribute__((target("avx512f"))) void matVecAvx512(const float* w, const float* v,
                                                     const float* bias, float* out, std::int64_t c,
                                                     std::int64_t r0, std::int64_t r1) {
  matVecOf(w, v, bias, out, c, r0, r1);
}
#endif
void channelSumsBase(const float* x, std::int64_t pixels, std::int64_t c, std::int64_t c0,
                     std::int64_t c1, float* sum, float* block) {
  channelSumsOf(x, pixels, c, c0, c1, sum, block);
}
void scalePixelsBase(const float* x, const float* s, float* out, std::int64_t c, std::int64_t p0,
                     std::int64_t p1) {
  scalePixelsOf(x, s, out, c, p0, p1);
}
void matVecBase(const float* w, const float* v, const float* bias, float* out, std::int64_t c,
                std::int64_t r0, std::int64_t r1) {
  matVecOf(w, v, bias, out, c, r0, r1);
}

namespace {

// A packed 1x1 convolution this op computes itself: stride 1, no padding, one group, no
// residual, its float weight dense.
bool pointwise(const PackedConv& w, std::int64_t in_channels) {
  const at::Tensor& k = w.weight;
  return k.dim() == 4 && k.size(1) == in_channels && k.size(2) == 1 && k.size(3) == 1 &&
         w.groups == 1 && !w.residual && k.scalar_type() == at::kFloat && k.is_contiguous() &&
         (!w.bias || (w.bias->scalar_type() == at::kFloat && w.bias->is_contiguous() &&
                      w.bias->numel() == k.size(0))) &&
         std::all_of(w.stride.begin(), w.stride.end(), [](auto s) { return s == 1; }) &&
         std::all_of(w.padding.begin(), w.padding.end(), [](auto p) { return p == 0; });
}

// The activation `post` of n values in place, each by ATen's scalar formula for its op (NaN kept,
// +-inf and overflow as ATen's: relu's clamp_min, hardsigmoid's min(max(x + 3, 0), 6) * (1/6),
// sigmoid's 1 / (1 + exp(-x)), silu's x / (1 + exp(-x))); false for an activation left to
// ATen's op. On a block's few values (8 to 1152) ATen's op cost 2-5 us of dispatch and a new
// tensor each, twice a block: 36 of MobileNetV3-Small's 1.7 ms at two threads, 104 of
// EfficientNet-B0's 8.9.
bool activateFew(float* p, std::int64_t n, PostOp post) {
  switch (post) {
  case PostOp::None:
    return true;
  case PostOp::Relu:
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = std::isnan(p[i]) ? p[i] : std::max(p[i], 0.f);
    return true;
  case PostOp::Hardsigmoid:
    for (std::int64_t i = 0; i < n; ++i) {
      const float t = p[i] + 3.f;
      p[i] = std::isnan(t) ? t : std::min(std::max(t, 0.f), 6.f) * (1.f / 6.f);
    }
    return true;
  case PostOp::Sigmoid:
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = 1.f / (1.f + std::exp(-p[i]));
    return true;
  case PostOp::Silu:
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = p[i] / (1.f + std::exp(-p[i]));
    return true;
  default:
    return false;
  }
}

// The convolution `w` of the means m ([n, c, 1, 1]), its activation applied: [n, rows, 1, 1].
at::Tensor convOfMeans(PackedConv& w, const at::Tensor& m) {
  const std::int64_t n = m.size(0), c = m.size(1);
  if (!pointwise(w, c))
    return w.run(m);
  const std::int64_t rows = w.weight.size(0);
  at::Tensor out = at::empty({n, rows, 1, 1}, m.options());
  const float* k = w.weight.data_ptr<float>();
  const float* b = w.bias ? w.bias->data_ptr<float>() : nullptr;
  const at::Tensor mc = m.contiguous();
  const float* means = mc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  // Rows split between the threads past kMatVecGrain weights: each core streams its share of
  // the weight (cold: 330 KiB for MobileNetV3's 576 -> 144), each row's sum the same at any count.
  const std::int64_t grain = std::max<std::int64_t>(1, kMatVecGrain / std::max<std::int64_t>(c, 1));
  for (std::int64_t i = 0; i < n; ++i)
    at::parallel_for(0, rows, grain, [&](std::int64_t r0, std::int64_t r1) {
      cpuKernels().matVec(k, means + i * c, b, o + i * rows, c, r0, r1);
    });
  return activateFew(out.data_ptr<float>(), out.numel(), w.post) ? out : applyPostOp(out, w.post);
}

// The mean over each image's pixels, [n, c, 1, 1] (its strides those of either layout). Each
// block of kBlock pixels is summed alone, on whichever thread has its pixels (the threads split
// the image as the convolution before split its output, so each reads what its own core
// wrote), and the blocks' sums are added in order: the same bits at any thread count as one
// thread summing block after block.
at::Tensor poolChannelsLast(const at::Tensor& x) {
  const std::int64_t n = x.size(0), c = x.size(1), pixels = x.size(2) * x.size(3);
  at::Tensor mean =
      at::empty({n, c, 1, 1}, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  const std::int64_t blocks = (pixels + kBlock - 1) / kBlock;
  at::Tensor partial = at::empty({blocks, c}, x.options());
  float* part = partial.data_ptr<float>();
  const float* in = x.data_ptr<float>();
  float* m = mean.data_ptr<float>();
  const auto count = static_cast<float>(pixels);
  const std::int64_t grain = std::max<std::int64_t>(1, kGrain / (kBlock * c));
  for (std::int64_t i = 0; i < n; ++i) {
    const float* img = in + i * pixels * c;
    at::parallel_for(0, blocks, grain, [&](std::int64_t b0, std::int64_t b1) {
      auto* scratch = static_cast<float*>(detail::threadScratch(sizeof(float) * c));
      for (std::int64_t b = b0; b < b1; ++b)
        cpuKernels().channelSums(img + b * kBlock * c, std::min(kBlock, pixels - b * kBlock), c, 0,
                                 c, part + b * c, scratch);
    });
    float* sum = m + i * c;
    std::fill(sum, sum + c, 0.f);
    for (std::int64_t b = 0; b < blocks; ++b)
      for (std::int64_t j = 0; j < c; ++j)
        sum[j] += part[b * c + j];
    for (std::int64_t j = 0; j < c; ++j)
      sum[j] /= count;
  }
  return mean;
}

// x * scale, into `x` itself when `in_place` (each element read before it is written).
at::Tensor scaleChannelsLast(const at::Tensor& x, const at::Tensor& scale, bool in_place) {
  const std::int64_t n = x.size(0), c = x.size(1), pixels = x.size(2) * x.size(3);
  at::Tensor out =
      in_place ? x
               : at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::ChannelsLast));
  if (in_place)
    detail::markWritten(x);
  const at::Tensor s = scale.contiguous();
  const float* in = x.data_ptr<float>();
  const float* sp = s.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const std::int64_t grain = std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(c, 1));
  for (std::int64_t i = 0; i < n; ++i)
    at::parallel_for(0, pixels, grain, [&](std::int64_t p0, std::int64_t p1) {
      cpuKernels().scalePixels(in + i * pixels * c, sp + i * c, o + i * pixels * c, c, p0, p1);
    });
  return out;
}

bool takes(const at::Tensor& x) {
  return x.dim() == 4 && x.layout() == at::kStrided && x.device().is_cpu() &&
         x.scalar_type() == at::kFloat && !detail::wantsGradient(x) && x.numel() > 0 &&
         !x.is_neg() && !x.is_conj() && x.is_contiguous(at::MemoryFormat::ChannelsLast);
}

// The block, scaling x in place when `write_x`.
at::Tensor squeezeExciteImpl(const at::Tensor& x, const c10::intrusive_ptr<PackedConv>& reduce,
                             const c10::intrusive_ptr<PackedConv>& expand, bool write_x) {
  reduce->checkCalledAs(2, false);
  expand->checkCalledAs(2, false);
  if (!takes(x)) // the original ops, their results and errors
    return at::mul(expand->run(reduce->run(at::adaptive_avg_pool2d(x, {1, 1}))), x);
  const std::optional<double> x_bound = detail::knownBound(x); // before x may be written
  const at::Tensor scale = convOfMeans(*expand, convOfMeans(*reduce, poolChannelsLast(x)));
  if (scale.sizes() != at::IntArrayRef({x.size(0), x.size(1), 1, 1}) ||
      scale.scalar_type() != at::kFloat)
    return at::mul(scale, x); // a scale of other channels: ATen's broadcast and its error
  at::Tensor out = scaleChannelsLast(x, scale, write_x);
  // A scale in [0, 1] (a sigmoid's, a hard sigmoid's) keeps a bound x carried.
  if (x_bound && (expand->post == PostOp::Sigmoid || expand->post == PostOp::Hardsigmoid))
    detail::noteBound(out, *x_bound);
  return out;
}

} // namespace

at::Tensor squeezeExcite(const at::Tensor& x, const c10::intrusive_ptr<PackedConv>& reduce,
                         const c10::intrusive_ptr<PackedConv>& expand) {
  return squeezeExciteImpl(x, reduce, expand, false);
}

at::Tensor squeezeExciteInto(at::Tensor&& x, const c10::intrusive_ptr<PackedConv>& reduce,
                             const c10::intrusive_ptr<PackedConv>& expand) {
  // Held by no one else, x may be scaled where it is (its lines in the cache of the core that
  // wrote them) instead of into a new tensor.
  const bool alone = detail::ownedAlone(x);
  const at::Tensor held = std::move(x);
  return squeezeExciteImpl(held, reduce, expand, alone);
}

} // namespace xalloc::runtime
