#include "packed_checks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <optional>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "finite_scan.h"
#include "xalloc/tensor_extent.h"

namespace xalloc::runtime::detail {

void checkStoredTensor(const at::Tensor& t, const char* who, const char* what) {
  TORCH_CHECK(t.defined(), who, ": the ", what, " is an undefined tensor");
  TORCH_CHECK(t.layout() == at::kStrided, who, ": the ", what, " must be a dense tensor, not ",
              t.layout());
  TORCH_CHECK(t.scalar_type() == at::kFloat, who, ": the ", what, " is ", t.scalar_type(),
              "; packed ops take float32");
  const std::string problem = tensorExtentProblem(t);
  TORCH_CHECK(problem.empty(), who, ": the ", what, " has ", problem,
              " (the model file's tensor record is shorter than its sizes say)");
}

void checkOnCpu(const at::Tensor& t, const char* who, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), who, ": the ", what, " is on ", t.device(),
              "; the packed ops run on CPU tensors (load the model with map_location=\"cpu\")");
}

void checkInput(const at::Tensor& x, const char* op) {
  TORCH_CHECK(x.defined(), op, ": the input is an undefined tensor");
  TORCH_CHECK(x.device().is_cpu(), op, ": the input is on ", x.device(),
              "; this op runs on CPU tensors");
  TORCH_CHECK(x.layout() == at::kStrided, op, ": the input must be a dense tensor, not ",
              x.layout());
  TORCH_CHECK(x.scalar_type() == at::kFloat, op, ": expected a float32 input, got ",
              x.scalar_type(), " (the packed weight is float32)");
}

void checkConvParams(const char* who, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation, std::int64_t groups, std::int64_t outputs,
                     std::size_t dims) {
  TORCH_CHECK(stride.size() == dims && padding.size() == dims && dilation.size() == dims, who,
              ": stride, padding and dilation take ", dims, " numbers each, got ", stride.size(),
              ", ", padding.size(), " and ", dilation.size());
  constexpr std::int64_t kMaxParam = std::int64_t{1} << 31;
  for (std::size_t d = 0; d < dims; ++d) {
    TORCH_CHECK(stride[d] >= 1 && stride[d] < kMaxParam, who,
                ": non-positive stride is not supported (stride ", stride, ")");
    TORCH_CHECK(padding[d] >= 0 && padding[d] < kMaxParam, who,
                ": negative padding is not supported (padding ", padding, ")");
    TORCH_CHECK(dilation[d] >= 1 && dilation[d] < kMaxParam, who,
                ": dilation should be greater than zero (dilation ", dilation, ")");
  }
  TORCH_CHECK(groups >= 1, who, ": non-positive groups is not supported (groups ", groups, ")");
  TORCH_CHECK(outputs % groups == 0, who, ": groups=", groups, " must divide the weight's ",
              outputs, " outputs");
}

PostOp checkBiasAndPostOp(const char* who, at::Tensor& weight, c10::optional<at::Tensor>& bias,
                          const std::string& post_op) {
  if (bias) {
    checkStoredTensor(*bias, who, "bias");
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == weight.size(0), who,
                ": the bias needs one value per output (", weight.size(0), "), got sizes ",
                bias->sizes());
    *bias = bias->contiguous();
  }
  const auto p = parsePostOp(post_op);
  TORCH_CHECK(p, who, ": unknown post-op '", post_op, "'");
  weight = weight.contiguous();
  return *p;
}

namespace {
double finiteOrInf(double m) {
  return std::isfinite(m) ? m : std::numeric_limits<double>::infinity();
}
} // namespace

SumBounds sumBounds(const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
  SumBounds b;
  if (!weight.device().is_cpu())
    return b;
  if (weight.numel() > 0)
    b.weights = finiteOrInf(
        weight.reshape({weight.size(0), -1}).abs().to(at::kDouble).sum(1).max().item<double>());
  if (bias && bias->numel() > 0)
    b.bias = finiteOrInf(bias->abs().max().item<double>());
  return b;
}

bool wantsGradient(const at::Tensor& x) {
  return (at::GradMode::is_enabled() && x.requires_grad()) || x._fw_grad(0).defined();
}

bool ownedAlone(const at::Tensor& t) {
  return t.defined() && t.layout() == at::kStrided && t.use_count() == 1 &&
         t.storage().use_count() == 1;
}

void markWritten(const at::Tensor& t) {
  if (!t.is_inference())
    t.unsafeGetTensorImpl()->bump_version();
}

namespace {
// A note of noteBound. The weak reference keeps the tensor object's memory (not its storage)
// from being reused while the note exists, so an equal address is the same object.
struct BoundNote {
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> impl;
  std::int64_t version = 0;
  const void* data = nullptr;
  std::int64_t numel = 0;
  double bound = 0;
};
constexpr std::size_t kNotes = 16;
struct BoundNotes {
  std::array<std::optional<BoundNote>, kNotes> notes;
  std::size_t next = 0;
};
thread_local BoundNotes t_notes;

bool notable(const at::Tensor& t) {
  return t.defined() && !t.is_inference() && t.layout() == at::kStrided && t.has_storage();
}

std::optional<BoundNote>* noteOf(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  for (auto& n : t_notes.notes)
    if (n && n->impl._unsafe_get_target() == impl)
      return &n;
  return nullptr;
}
} // namespace

void noteBound(const at::Tensor& t, double bound) {
  if (!notable(t))
    return;
  std::optional<BoundNote>* slot = noteOf(t);
  if (!(bound < 1e38)) { // NaN, infinity, or near float's range: nothing known
    if (slot)
      slot->reset();
    return;
  }
  if (!slot) {
    slot = &t_notes.notes[t_notes.next];
    t_notes.next = (t_notes.next + 1) % kNotes;
  }
  *slot = BoundNote{
      c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(t.getIntrusivePtr()),
      t._version(), t.data_ptr(), t.numel(), bound};
}

std::optional<double> knownBound(const at::Tensor& t) {
  if (!notable(t))
    return std::nullopt;
  const std::optional<BoundNote>* n = noteOf(t);
  if (!n || (*n)->version != t._version() || (*n)->data != t.data_ptr() || (*n)->numel != t.numel())
    return std::nullopt;
  return (*n)->bound;
}

double postOpBound(PostOp p, double bound) {
  switch (p) {
  case PostOp::Relu6:
    return std::min(bound, 6.0);
  case PostOp::Sigmoid:
  case PostOp::Hardsigmoid:
  case PostOp::Tanh:
    return std::min(bound, 1.0);
  default: // none, relu, silu, gelu, hardswish: |y| <= |x|
    return bound;
  }
}

bool needsReference(const at::Tensor& x, PostOp post, const SumBounds& bounds,
                    double* input_bound) {
  const std::optional<double> known = knownBound(x);
  if (input_bound)
    *input_bound = known ? *known : std::numeric_limits<double>::infinity();
  if (wantsGradient(x))
    return true;
  // Other activations keep NaN and infinity through oneDNN's kernels as through ATen's (a NaN
  // or an infinity of each sign in a sum gives the same result in any order), and saturate
  // (sigmoid, tanh) or never overflow on the way (silu, gelu) as ATen's do.
  if (!eatsNaN(post) && post != PostOp::Hardswish)
    return false;
  // Float's largest is 3.4e38: below 1e38 no partial sum overflows, whatever its order; below
  // 5e37 ATen's hardswish (x * 6 first) does not overflow either.
  const double kSafe = post == PostOp::Hardswish ? 5e37 : 1e38;
  if (!(bounds.weights < kSafe && bounds.bias < kSafe))
    return true;
  // A note's bound grows layer by layer (each multiplies it by its weights' sums) far past
  // the values themselves: too large to pass, it gives way to a scan, which finds the real one.
  if (known && *known * bounds.weights + bounds.bias < kSafe)
    return false;
  const FloatScan s = scanFloats(x.data_ptr<float>(), x.numel());
  if (!s.finite)
    return true;
  const auto m = static_cast<double>(s.max_abs);
  if (input_bound)
    *input_bound = m;
  return !(m * bounds.weights + bounds.bias < kSafe);
}

void* threadScratch(std::size_t bytes) {
  struct Buffer {
    void* p = nullptr;
    std::size_t size = 0;
    ~Buffer() { std::free(p); }
  };
  thread_local Buffer b;
  if (bytes > b.size) {
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p)
      throw std::bad_alloc();
    std::free(b.p);
    b.p = p;
    b.size = rounded;
  }
  return b.p;
}

} // namespace xalloc::runtime::detail
