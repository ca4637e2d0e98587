// The oneDNN the packed ops run on: libtorch's own (the wheel links it into libtorch_cpu, with its
// symbols hidden), reached through the ops libtorch registers for Inductor's CPU backend:
// mkldnn::_reorder_convolution_weight and _reorder_linear_weight pack a weight once into the
// blocked layout oneDNN's kernel for a shape reads (an opaque MKLDNN tensor), and
// mkldnn::_convolution_pointwise (plain, and .binary / _.binary with a residual) and
// _linear_pointwise run it on dense activations with the activation fused. No second oneDNN and
// no second OpenMP come into the process. Shared by packed_conv.cpp and packed_linear.cpp.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "xalloc/runtime/packed.h"

namespace xalloc::runtime {

struct PackedWeights {
  at::Tensor packed; // an MKLDNN tensor (blocked), or the dense weight where none is packed
};

namespace detail {

/// libtorch's oneDNN ops, by the names this torch registers them under (one table,
/// packed_common.cpp): true when all are there.
bool onednnOpsAvailable();
/// A dense weight packed for a 2-D or 3-D convolution of inputs of `input_sizes`.
at::Tensor reorderConvWeight(const at::Tensor& w, at::IntArrayRef padding, at::IntArrayRef stride,
                             at::IntArrayRef dilation, std::int64_t groups,
                             at::IntArrayRef input_sizes);
/// A dense [out, in] weight packed for a linear of `rows` rows.
at::Tensor reorderLinearWeight(const at::Tensor& w, std::int64_t rows);
/// post(conv(x)) with weight `w` (packed or dense); x channels-last: a channels-last output.
at::Tensor convPointwise(const at::Tensor& x, const at::Tensor& w,
                         const std::optional<at::Tensor>& bias, at::IntArrayRef padding,
                         at::IntArrayRef stride, at::IntArrayRef dilation, std::int64_t groups,
                         PostOp post);
/// post(conv(x) + out) into `out` (the sum post-op accumulates into what it holds).
void convPointwiseAddInto(at::Tensor& out, const at::Tensor& x, const at::Tensor& w,
                          const std::optional<at::Tensor>& bias, at::IntArrayRef padding,
                          at::IntArrayRef stride, at::IntArrayRef dilation, std::int64_t groups,
                          PostOp post);
/// post(x W^T + b) with the packed weight of reorderLinearWeight; x 2-D, row-major.
at::Tensor linearPointwise(const at::Tensor& x, const at::Tensor& w,
                           const std::optional<at::Tensor>& bias, PostOp post);

/// out2d = kernelPostOp(post)(x2d w2d^T + bias) as one GEMM of the BLAS libtorch runs on (MKL
/// in the wheel), the activation in place after it: for the products where libtorch's oneDNN op
/// costs more than the product, since it makes its primitive descriptor again at every call
/// (60-70 us on this VM, where the kernel of a small convolution runs 4-12). x2d, w2d and out2d
/// row-major; finishPostOp does the rest, as after the oneDNN ops.
void gemmPointwise(at::Tensor& out2d, const at::Tensor& x2d, const at::Tensor& w2d,
                   const std::optional<at::Tensor>& bias, PostOp post);
/// Whether a linear of `multiply_adds` runs as gemmPointwise rather than oneDNN's inner product
/// with a packed weight (below ~8M; above, oneDNN's kernel is as fast or faster).
bool linearGemmPays(double multiply_adds);
/// kernelPostOp(p) applied in place with ATen's in-place op.
void activateInPlace(at::Tensor& y, PostOp p);

/// The activation oneDNN's kernel applies for `p`: `p`, but none for SiLU where this CPU runs
/// the faster pass (silu_pass.h), which finishPostOp then applies.
PostOp kernelPostOp(PostOp p);
/// What kernelPostOp(p) left to do on the kernel's output.
void finishPostOp(PostOp p, at::Tensor& out);

/// Sets the calling thread's OpenMP thread count (oneDNN reads it when a primitive runs) for its
/// lifetime: torch's own libgomp, the one team.
class OmpThreads {
public:
  explicit OmpThreads(int n);
  ~OmpThreads();
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

private:
  int saved_;
};

/// Two packed weights hold the same bytes: a kernel reads either as the other's layout and gets
/// the same values, so one copy serves both.
bool sameBytes(const at::Tensor& a, const at::Tensor& b);

// The packed copy among `list` that holds the bytes `made` holds, or `made` (and `list` pruned of
// copies no cached shape uses any more): shapes whose kernels read one layout share one copy.
inline std::shared_ptr<PackedWeights>
sharedWeights(std::mutex& m, std::vector<std::weak_ptr<PackedWeights>>& list, at::Tensor made) {
  std::lock_guard<std::mutex> lock(m);
  list.erase(std::remove_if(list.begin(), list.end(), [](const auto& w) { return w.expired(); }),
             list.end());
  for (const auto& w : list)
    if (auto s = w.lock(); s && sameBytes(s->packed, made))
      return s;
  auto s = std::make_shared<PackedWeights>(PackedWeights{std::move(made)});
  list.push_back(s);
  return s;
}

inline std::size_t liveCount(std::mutex& m, const std::vector<std::weak_ptr<PackedWeights>>& l) {
  std::lock_guard<std::mutex> lock(m);
  return static_cast<std::size_t>(
      std::count_if(l.begin(), l.end(), [](const auto& w) { return !w.expired(); }));
}

} // namespace detail
} // namespace xalloc::runtime
