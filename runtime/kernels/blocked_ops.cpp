// The blocked regions' entry, and their activations and pooling: relu, hard swish, hard sigmoid
// and relu6 in place over the raw buffer with ATen's kernels (NaN kept as ATen keeps it; a copy
// first when out of place), out-of-place relu and max pooling through libtorch's MKLDNN ops with
// a NaN scan of the input (then ATen's result, densely: NaN is rare, correctness is not).
#include "blocked_ops.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <torch/library.h>

#include "finite_scan.h"
#include "packed_checks.h"

#include "xalloc/torch_compat.h"

namespace xalloc::runtime::detail {

// libtorch's own accessors of an MKLDNN tensor's buffer (what Inductor reads them with): its
// data and its physical size, padded lanes included. oneDNN pads only the channels of a layout
// blocked on them (nChw16c, nChw8c, nCdhw16c) when they are not a multiple of the block: a buffer
// of exactly that size is read as that layout (N, C/block, spatial..., block), the last block's
// tail the padded lanes; any other padded size is a layout the runtime does not know.
MkldnnBuffer mkldnnBuffer(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined() && t.is_mkldnn() && t.scalar_type() == at::kFloat, op,
              ": expected a float32 MKLDNN tensor");
  void* data = compat::mkldnnData(t);
  const std::int64_t bytes = compat::mkldnnBytes(t);
  TORCH_CHECK(data != nullptr && bytes >= t.numel() * static_cast<std::int64_t>(sizeof(float)), op,
              ": an MKLDNN tensor without a buffer of its ", t.numel(), " elements");
  MkldnnBuffer b;
  b.data = static_cast<float*>(data);
  b.elements = bytes / static_cast<std::int64_t>(sizeof(float));
  if (b.elements == t.numel())
    return b;
  b.pad_offset = -1;
  b.pad_lanes = b.elements - t.numel();
  if (t.dim() != 4 && t.dim() != 5)
    return b;
  const std::int64_t c = t.size(1);
  const std::int64_t spatial = t.numel() / std::max<std::int64_t>(t.size(0) * c, 1);
  for (const std::int64_t block : {16, 8}) {
    const std::int64_t blocks = (c + block - 1) / block;
    if (c % block == 0 || t.size(0) * blocks * block * spatial != b.elements)
      continue;
    // (n, c-block, spatial..., lane): strides of every dimension but the channels.
    b.pad_lanes = blocks * block - c;
    b.pad_sizes = {t.size(0)};
    b.pad_strides = {blocks * block * spatial};
    std::int64_t stride = block * spatial;
    for (std::int64_t d = 2; d < t.dim(); ++d) {
      stride /= t.size(d);
      b.pad_sizes.push_back(t.size(d));
      b.pad_strides.push_back(stride);
    }
    b.pad_offset = (c / block) * block * spatial + c % block;
    return b;
  }
  return b;
}

namespace {

at::Tensor rawView(const MkldnnBuffer& b) {
  return at::from_blob(b.data, {b.elements}, at::TensorOptions().dtype(at::kFloat));
}

bool hasNaN(const at::Tensor& t, const char* op) {
  if (t.numel() == 0) // an empty batch: no buffer to read, nothing in it
    return false;
  const MkldnnBuffer b = mkldnnBuffer(t, op);
  return anyNaN(b.data, b.elements);
}

// An activation computed in place over the raw buffer with ATen's own kernel (NaN kept as
// ATen keeps it). An activation that is not 0 at 0 (the hard sigmoid: 0.5) has the padded lanes
// of a channel-blocked buffer put back to 0, as oneDNN expects them.
template <class F>
at::Tensor unaryInPlace(at::Tensor self, const char* op, F f, bool zero_at_zero) {
  if (!self.is_mkldnn()) {
    f(self);
    return self;
  }
  if (self.numel() == 0) // an empty batch: no buffer, nothing to compute
    return self;
  const MkldnnBuffer b = mkldnnBuffer(self, op);
  at::Tensor raw = rawView(b);
  TORCH_CHECK(zero_at_zero || b.pad_offset >= 0, op,
              ": a blocked layout whose padded lanes the runtime cannot find, to zero them again");
  f(raw);
  if (!zero_at_zero && b.pad_lanes > 0) {
    std::vector<std::int64_t> sizes = b.pad_sizes, strides = b.pad_strides;
    sizes.push_back(b.pad_lanes);
    strides.push_back(1);
    raw.as_strided(sizes, strides, b.pad_offset).zero_();
  }
  return self;
}

// libtorch 1.13's out-of-place MKLDNN hard swish, hard sigmoid and relu6 (prim::MKLDNNHardSwish
// ...) write into an output sized by the logical element count over a buffer the size of the
// padded one: with channels not a multiple of the block (120 of 128), the result is wrong (by 28
// on a random convolution's output). Out of place is a copy, then in place.
template <class F>
at::Tensor unaryOutOfPlace(const at::Tensor& self, const char* op, F f, bool zero_at_zero) {
  return unaryInPlace(self.clone(), op, f, zero_at_zero);
}

at::Tensor blockedRelu_(at::Tensor self) {
  return unaryInPlace(
      self, "xalloc::blocked_relu_", [](at::Tensor& t) { at::relu_(t); }, true);
}

at::Tensor blockedRelu(const at::Tensor& self) {
  // libtorch's out-of-place MKLDNN relu is right but for NaN: its result unless there is one.
  if (self.is_mkldnn() && !hasNaN(self, "xalloc::blocked_relu"))
    return at::relu(self);
  return unaryOutOfPlace(
      self, "xalloc::blocked_relu", [](at::Tensor& t) { at::relu_(t); }, true);
}

void hardswish(at::Tensor& t) {
  at::hardswish_(t);
}
void hardsigmoid(at::Tensor& t) {
  at::hardsigmoid_(t);
}
void relu6(at::Tensor& t) {
  at::hardtanh_(t, 0, 6);
}

// libtorch's MKLDNN max pooling (oneDNN's, on the blocked tensor where it lies: in 3-D 1-2 ms
// where the dense one took 27 ms a pooling on S3D, 56% of the rewritten model) drops NaN and
// refuses dilation: ATen's dense pooling there, and for an empty batch, between conversions.
template <class Pool>
at::Tensor blockedMaxPool(const char* op, Pool pool, const at::Tensor& self, at::IntArrayRef kernel,
                          at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                          bool ceil_mode) {
  if (!self.is_mkldnn())
    return pool(self, kernel, stride, padding, dilation, ceil_mode);
  const bool dilated =
      std::any_of(dilation.begin(), dilation.end(), [](std::int64_t d) { return d != 1; });
  if (dilated || self.numel() == 0 || hasNaN(self, op))
    return pool(self.to_dense(), kernel, stride, padding, dilation, ceil_mode).to_mkldnn();
  return pool(self, kernel, stride.empty() ? kernel : stride, padding, dilation, ceil_mode);
}

at::Tensor blockedMaxPool2d(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  return blockedMaxPool(
      "xalloc::blocked_max_pool2d",
      [](auto&&... a) { return at::max_pool2d(std::forward<decltype(a)>(a)...); }, self, kernel,
      stride, padding, dilation, ceil_mode);
}

at::Tensor blockedMaxPool3d(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  return blockedMaxPool(
      "xalloc::blocked_max_pool3d",
      [](auto&&... a) { return at::max_pool3d(std::forward<decltype(a)>(a)...); }, self, kernel,
      stride, padding, dilation, ceil_mode);
}

// A blocked region's entry: MKLDNN ops compute no gradients, so an input that wants them is
// refused here, in one line, rather than coming back detached at the region's exit.
at::Tensor toBlocked(const at::Tensor& self) {
  TORCH_CHECK(!wantsGradient(self),
              "xalloc::to_blocked: this model was rewritten for inference, and part of it runs "
              "in oneDNN's blocked format, which computes no gradients: call it under "
              "torch.no_grad() or torch.inference_mode(), or take gradients of the original "
              "model (`xrewrite --show` on this file names it, under \"model\") or of one "
              "rewritten with `xsched --form portable`");
  return self.to_mkldnn();
}

} // namespace

TORCH_LIBRARY_FRAGMENT(xalloc, m) {
  m.def("to_blocked(Tensor self) -> Tensor", toBlocked);
  m.def("blocked_relu(Tensor self) -> Tensor", blockedRelu);
  m.def("blocked_relu_(Tensor(a!) self) -> Tensor(a!)", blockedRelu_);
  m.def("blocked_hardswish(Tensor self) -> Tensor", [](const at::Tensor& t) {
    return unaryOutOfPlace(t, "xalloc::blocked_hardswish", hardswish, true);
  });
  m.def("blocked_hardswish_(Tensor(a!) self) -> Tensor(a!)", [](at::Tensor t) {
    return unaryInPlace(t, "xalloc::blocked_hardswish_", hardswish, true);
  });
  m.def("blocked_hardsigmoid(Tensor self) -> Tensor", [](const at::Tensor& t) {
    return unaryOutOfPlace(t, "xalloc::blocked_hardsigmoid", hardsigmoid, false);
  });
  m.def("blocked_hardsigmoid_(Tensor(a!) self) -> Tensor(a!)", [](at::Tensor t) {
    return unaryInPlace(t, "xalloc::blocked_hardsigmoid_", hardsigmoid, false);
  });
  m.def("blocked_relu6(Tensor self) -> Tensor", [](const at::Tensor& t) {
    return unaryOutOfPlace(t, "xalloc::blocked_relu6", relu6, true);
  });
  m.def("blocked_relu6_(Tensor(a!) self) -> Tensor(a!)",
        [](at::Tensor t) { return unaryInPlace(t, "xalloc::blocked_relu6_", relu6, true); });
  m.def("blocked_max_pool2d(Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, "
        "int[2] dilation, bool ceil_mode) -> Tensor",
        blockedMaxPool2d);
  m.def("blocked_max_pool3d(Tensor self, int[3] kernel_size, int[3] stride, int[3] padding, "
        "int[3] dilation, bool ceil_mode) -> Tensor",
        blockedMaxPool3d);
}

} // namespace xalloc::runtime::detail
