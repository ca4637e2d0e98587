// The blocked regions' activations and pooling that keep NaN: relu in place over the raw
// buffer with ATen's kernel (relu(0) = 0 keeps the padded lanes zero, as libtorch's own MKLDNN
// unary ops rely on), and out-of-place relu and max pooling through libtorch's MKLDNN ops with a
// NaN scan of the input (then ATen's result, densely: NaN is rare, correctness is not).
#include "blocked_ops.h"

#include <ATen/ATen.h>
#include <ATen/OpaqueTensorImpl.h>
#include <torch/library.h>

#include "finite_scan.h"
#include "packed_checks.h"

#ifdef XALLOC_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace xalloc::runtime::detail {

#ifdef XALLOC_WITH_DNNL
namespace {
// libtorch 1.13 keeps an MKLDNN tensor as an OpaqueTensorImpl holding
// intrusive_ptr<IntrusivePtrTargetWrapper<ideep::tensor>> (ATen/native/mkldnn/MKLDNNCommon.h,
// which Debian does not install), and ideep::tensor's first base is dnnl::memory (it has no
// virtual functions): this mirror has the same layout. What it reads is checked against the
// tensor's own sizes before use, and the runtime's tests read known tensors through it.
struct MkldnnTarget : c10::intrusive_ptr_target {
  dnnl::memory target;
};
using MkldnnImpl = at::OpaqueTensorImpl<c10::intrusive_ptr<MkldnnTarget>>;
} // namespace

MkldnnBuffer mkldnnBuffer(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined() && t.is_mkldnn() && t.scalar_type() == at::kFloat, op,
              ": expected a float32 MKLDNN tensor");
  auto* impl = static_cast<MkldnnImpl*>(t.unsafeGetTensorImpl());
  const auto& handle = impl->unsafe_opaque_handle();
  TORCH_CHECK(handle.defined(), op, ": an MKLDNN tensor without a buffer");
  const dnnl::memory& m = handle->target;
  const dnnl::memory::desc d = m.get_desc();
  const std::size_t bytes = d.get_size();
  TORCH_CHECK(d.dims() == t.sizes().vec() && d.data_type() == dnnl::memory::data_type::f32 &&
                  m.get_data_handle() != nullptr &&
                  bytes >= static_cast<std::size_t>(t.numel()) * sizeof(float),
              op,
              ": cannot read this MKLDNN tensor's buffer (this libtorch lays MKLDNN tensors "
              "out otherwise than the runtime was built for)");
  return {static_cast<float*>(m.get_data_handle()),
          static_cast<std::int64_t>(bytes / sizeof(float))};
}
#else
MkldnnBuffer mkldnnBuffer(const at::Tensor&, const char* op) {
  TORCH_CHECK(false, op, ": this runtime was built without oneDNN");
}
#endif

namespace {

at::Tensor rawView(const MkldnnBuffer& b) {
  return at::from_blob(b.data, {b.elements}, at::TensorOptions().dtype(at::kFloat));
}

bool hasNaN(const at::Tensor& t, const char* op) {
  const MkldnnBuffer b = mkldnnBuffer(t, op);
  return anyNaN(b.data, b.elements);
}

at::Tensor blockedRelu_(at::Tensor self) {
  if (!self.is_mkldnn())
    return at::relu_(self);
  at::Tensor raw = rawView(mkldnnBuffer(self, "xalloc::blocked_relu_"));
  at::relu_(raw);
  return self;
}

at::Tensor blockedRelu(const at::Tensor& self) {
  if (!self.is_mkldnn())
    return at::relu(self);
  if (!hasNaN(self, "xalloc::blocked_relu"))
    return at::relu(self);
  at::Tensor out = self.clone();
  return blockedRelu_(out);
}

at::Tensor blockedMaxPool2d(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  if (!self.is_mkldnn() || !hasNaN(self, "xalloc::blocked_max_pool2d"))
    return at::max_pool2d(self, kernel, stride, padding, dilation, ceil_mode);
  return at::max_pool2d(self.to_dense(), kernel, stride, padding, dilation, ceil_mode).to_mkldnn();
}

// A blocked region's entry: MKLDNN ops compute no gradients, so an input that wants them is
// refused here, in one line, rather than coming back detached at the region's exit.
at::Tensor toBlocked(const at::Tensor& self) {
  TORCH_CHECK(!wantsGradient(self),
              "xalloc::to_blocked: this model was rewritten for inference, and part of it runs "
              "in oneDNN's blocked format, which computes no gradients: call it under "
              "torch.no_grad() or torch.inference_mode(), or take gradients of the original "
              "model (or of one rewritten with `xsched --form portable`)");
  return self.to_mkldnn();
}

} // namespace

TORCH_LIBRARY_FRAGMENT(xalloc, m) {
  m.def("to_blocked(Tensor self) -> Tensor", toBlocked);
  m.def("blocked_relu(Tensor self) -> Tensor", blockedRelu);
  m.def("blocked_relu_(Tensor(a!) self) -> Tensor(a!)", blockedRelu_);
  m.def("blocked_max_pool2d(Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, "
        "int[2] dilation, bool ceil_mode) -> Tensor",
        blockedMaxPool2d);
}

} // namespace xalloc::runtime::detail
