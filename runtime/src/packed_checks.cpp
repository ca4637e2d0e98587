#include "packed_checks.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>

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
