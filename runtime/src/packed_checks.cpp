#include "packed_checks.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "finite_scan.h"

namespace xalloc::runtime::detail {

void checkStoredTensor(const at::Tensor& t, const char* who, const char* what) {
  TORCH_CHECK(t.defined(), who, ": the ", what, " is an undefined tensor");
  TORCH_CHECK(t.layout() == at::kStrided, who, ": the ", what, " must be a dense tensor, not ",
              t.layout());
  TORCH_CHECK(t.scalar_type() == at::kFloat, who, ": the ", what, " is ", t.scalar_type(),
              "; packed ops take float32");
  if (t.numel() == 0 || t.device().is_meta())
    return;
  // The last element reached, in elements from the storage's start; every stride >= 0.
  std::int64_t last = t.storage_offset();
  TORCH_CHECK(last >= 0, who, ": the ", what, " has a negative storage offset ", last);
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    const std::int64_t st = t.stride(d), sz = t.size(d);
    TORCH_CHECK(st >= 0, who, ": the ", what, " has a negative stride ", st, " in dimension ", d);
    std::int64_t reach = 0;
    TORCH_CHECK(!__builtin_mul_overflow(sz - 1, st, &reach) &&
                    !__builtin_add_overflow(last, reach, &last),
                who, ": the ", what, "'s sizes ", t.sizes(), " and strides ", t.strides(),
                " reach past any storage");
  }
  const std::size_t item = t.element_size();
  const std::size_t have = t.storage().nbytes();
  TORCH_CHECK(static_cast<std::uint64_t>(last) < have / item && t.storage().data() != nullptr, who,
              ": the ", what, " of sizes ", t.sizes(), " reaches element ", last,
              " of a storage of ", have / item,
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

double rowSumBound(const at::Tensor& w) {
  if (w.numel() == 0)
    return 0;
  const at::Tensor a = w.reshape({w.size(0), -1}).abs().to(at::kDouble).sum(1);
  const double m = a.max().item<double>();
  return std::isfinite(m) ? m : std::numeric_limits<double>::infinity();
}

double maxAbs(const at::Tensor& b) {
  if (!b.defined() || b.numel() == 0)
    return 0;
  const double m = b.abs().max().item<double>();
  return std::isfinite(m) ? m : std::numeric_limits<double>::infinity();
}

bool wantsGradient(const at::Tensor& x) {
  return (at::GradMode::is_enabled() && x.requires_grad()) || x._fw_grad(0).defined();
}

bool needsReference(const at::Tensor& x, bool eats_nan, double sum_bound, double bias_bound) {
  if (wantsGradient(x))
    return true;
  // Other activations keep NaN and infinity through oneDNN's kernels as through ATen's (a NaN
  // or an infinity of each sign in a sum gives the same result in any order).
  if (!eats_nan)
    return false;
  // Float's largest is 3.4e38: below 1e38 no partial sum overflows, whatever its order.
  constexpr double kSafe = 1e38;
  if (!(sum_bound < kSafe && bias_bound < kSafe))
    return true;
  const FloatScan s = scanFloats(x.data_ptr<float>(), x.numel());
  return !s.finite || !(static_cast<double>(s.max_abs) * sum_bound + bias_bound < kSafe);
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
