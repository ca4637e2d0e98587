// xalloc::linear_packed: a frozen linear whose weight oneDNN packs once per number of rows (a
// bounded LRU; row counts whose kernels read the same packed layout share one copy), with the
// activation after it fused (packed.h): libtorch's own oneDNN (packed_onednn.h). A small one is
// one GEMM of libtorch's BLAS on the dense weight, the activation in place after it.
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "packed_checks.h"
#include "xalloc/runtime/packed.h"

#include "packed_onednn.h"

namespace xalloc::runtime {

namespace {
constexpr const char* kLinear = "xalloc::linear_packed";
} // namespace

at::Tensor PackedLinear::reference(const at::Tensor& x) const {
  return applyPostOp(at::linear(x, weight, bias ? *bias : at::Tensor()), post);
}

using namespace detail;

struct PackedLinear::Prepared {
  std::shared_ptr<PackedWeights> weights; // none where the product is one GEMM (gemmPointwise)
  int threads = 1;                        // of the caller's, the ones its kernel runs on
};

std::shared_ptr<const PackedLinear::Prepared> PackedLinear::prepare(std::int64_t rows) {
  // One per thread count, as PackedConv::prepare keeps them.
  const auto key = std::make_pair(rows, static_cast<std::int64_t>(at::get_num_threads()));
  if (auto p = cache_.find(key))
    return p;
  if (!cache_.admits(key))
    return nullptr; // rarer than the row counts prepared: ATen's op this time
  auto p = std::make_shared<Prepared>();
  const double work = static_cast<double>(rows) * static_cast<double>(weight.numel());
  p->threads = packedThreads(work, at::get_num_threads());
  if (!linearGemmPays(work)) {
    const OmpThreads team(p->threads);
    p->weights = sharedWeights(weights_mutex_, weights_, reorderLinearWeight(weight, rows));
  }
  return cache_.insert(key, std::move(p));
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
  if (in == 0 || rows == 0 || outs == 0 || detail::needsReference(x, post, bounds_))
    return reference(x_in);
  const auto p = prepare(rows);
  if (!p)
    return reference(x_in);
  std::vector<std::int64_t> sizes = x.sizes().vec();
  sizes.back() = outs;
  at::Tensor out;
  if (!p->weights) {
    out = at::empty({rows, outs}, x.options());
    gemmPointwise(out, x.reshape({rows, in}), weight, bias, post);
  } else {
    const OmpThreads team(p->threads);
    out = linearPointwise(x.reshape({rows, in}), p->weights->packed, bias, post);
  }
  finishPostOp(post, out);
  return out.view(sizes);
}

std::size_t PackedLinear::packedWeights() const {
  return liveCount(weights_mutex_, weights_);
}

std::size_t PackedLinear::preparedShapes() const {
  return cache_.size();
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
