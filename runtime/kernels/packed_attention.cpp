// xalloc::attention_packed: nn.MultiheadAttention's fast path (aten::_native_multi_head_attention)
// with frozen projections packed for oneDNN (packed.h). ATen's CPU kernel runs the two
// projections on BLAS, copies q, k and v into per-head tensors, runs a batched product per head
// pair and copies the context back; here the projections are packed inner products (libtorch's
// oneDNN, packed_onednn.h) and the batched products read the heads where the projection wrote
// them (strided views, no copy per head). The softmax is ATen's own kernel, run in place.
#include <cmath>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "finite_scan.h"
#include "packed_checks.h"
#include "xalloc/runtime/packed.h"

#include "packed_onednn.h"

namespace xalloc::runtime {

namespace {
constexpr const char* kWho = "xalloc.PackedAttention";

void checkSizes(const at::Tensor& t, const char* what, at::IntArrayRef want) {
  TORCH_CHECK(t.sizes().equals(want), kWho, ": expected `", what, "` of sizes ", want, ", got ",
              t.sizes());
}
} // namespace

PackedAttention::PackedAttention(std::int64_t embed_dim_in, std::int64_t num_heads_in,
                                 at::Tensor qkv_weight_in, at::Tensor qkv_bias_in,
                                 at::Tensor proj_weight_in, at::Tensor proj_bias_in)
    : embed_dim(embed_dim_in), num_heads(num_heads_in), qkv_weight(std::move(qkv_weight_in)),
      qkv_bias(std::move(qkv_bias_in)), proj_weight(std::move(proj_weight_in)),
      proj_bias(std::move(proj_bias_in)), cache_(packedCacheCapacity()) {
  TORCH_CHECK(embed_dim >= 1 && num_heads >= 1, kWho,
              ": needs embed_dim and num_heads of at least 1, got ", embed_dim, " and ", num_heads);
  TORCH_CHECK(embed_dim % num_heads == 0, kWho, ": `embed_dim` must divide evenly by `num_heads`");
  TORCH_CHECK(embed_dim < (std::int64_t{1} << 30), kWho, ": embed_dim ", embed_dim,
              " is too large");
  detail::checkStoredTensor(qkv_weight, kWho, "qkv_weight");
  detail::checkStoredTensor(qkv_bias, kWho, "qkv_bias");
  detail::checkStoredTensor(proj_weight, kWho, "proj_weight");
  detail::checkStoredTensor(proj_bias, kWho, "proj_bias");
  const std::int64_t e = embed_dim;
  checkSizes(qkv_weight, "qkv_weight", {3 * e, e});
  checkSizes(qkv_bias, "qkv_bias", {3 * e});
  checkSizes(proj_weight, "proj_weight", {e, e});
  checkSizes(proj_bias, "proj_bias", {e});
  qkv_ = c10::make_intrusive<PackedLinear>(qkv_weight, qkv_bias, "none");
  proj_ = c10::make_intrusive<PackedLinear>(proj_weight, proj_bias, "none");
  qkv_bounds_ = detail::sumBounds(qkv_weight, qkv_bias);
  proj_bounds_ = detail::sumBounds(proj_weight, proj_bias);
}

PackedAttention::~PackedAttention() = default;

PackedAttention::State PackedAttention::state() const {
  return {embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias};
}

std::size_t PackedAttention::preparedShapes() const {
  return cache_.size();
}

std::tuple<at::Tensor, at::Tensor>
PackedAttention::reference(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                           const c10::optional<at::Tensor>& mask, bool need_weights,
                           bool average_attn_weights, c10::optional<std::int64_t> mask_type) const {
  return at::_native_multi_head_attention(query, key, value, embed_dim, num_heads, qkv_weight,
                                          qkv_bias, proj_weight, proj_bias, mask, need_weights,
                                          average_attn_weights, mask_type);
}

using namespace detail;

// A shape seen often enough to keep: the two projections' packed weights are the PackedLinear
// ops' own (per row count); the products run on views of the projection's output.
struct PackedAttention::Prepared {};

std::shared_ptr<const PackedAttention::Prepared> PackedAttention::prepare(std::int64_t b,
                                                                          std::int64_t t) {
  const auto key = std::make_tuple(b, t, static_cast<std::int64_t>(at::get_num_threads()));
  if (auto p = cache_.find(key))
    return p;
  if (!cache_.admits(key))
    return nullptr; // rarer than the shapes prepared: ATen's op this time
  return cache_.insert(key, std::make_shared<Prepared>());
}

std::tuple<at::Tensor, at::Tensor>
PackedAttention::run(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                     const c10::optional<at::Tensor>& mask, bool need_weights,
                     bool average_attn_weights, c10::optional<std::int64_t> mask_type) {
  checkOnCpu(qkv_weight, kWho, "qkv_weight");
  auto aten = [&] {
    return reference(query, key, value, mask, need_weights, average_attn_weights, mask_type);
  };
  // The fast path's case only: self-attention on one dense float tensor, nothing masked, no
  // weights or gradients wanted. ATen's op answers (and refuses) everything else.
  const bool self = query.defined() && query.is_same(key) && query.is_same(value);
  const bool masked = mask.has_value() && mask->defined();
  if (!self || masked || need_weights || query.layout() != at::kStrided || query.is_nested() ||
      !query.device().is_cpu() || query.scalar_type() != at::kFloat || query.dim() != 3 ||
      query.size(2) != embed_dim || query.numel() == 0 || wantsGradient(query))
    return aten();
  const at::Tensor x = query.contiguous();
  // NaN and infinity take ATen's path; so does an input large enough that a product in another
  // order could overflow where ATen's would not (float's largest is 3.4e38).
  constexpr double kSafe = 1e38;
  const FloatScan scan = scanFloats(x.data_ptr<float>(), x.numel());
  const double qkv_max = static_cast<double>(scan.max_abs) * qkv_bounds_.weights + qkv_bounds_.bias;
  const double head_dim = static_cast<double>(embed_dim / num_heads);
  if (!scan.finite || !(qkv_max < kSafe) || !(head_dim * qkv_max * qkv_max < kSafe) ||
      !(qkv_max * proj_bounds_.weights + proj_bounds_.bias < kSafe))
    return aten();

  const std::int64_t b = x.size(0), t = x.size(1), e = embed_dim;
  const auto p = prepare(b, t);
  if (!p)
    return aten();
  const at::Tensor qkv = qkv_->run(x); // [B, T, 3E], the bias added
  const std::int64_t h = num_heads, d = e / h;
  // [B, T, 3, H, D] -> q, k, v as [B, H, T, D] views of it.
  const at::Tensor heads = qkv.view({b, t, 3, h, d}).permute({2, 0, 3, 1, 4});
  // ATen scales q by 1/sqrt(head_dim), computed in float, before the product: so here.
  const at::Tensor q = heads[0] * (1.0f / std::sqrt(static_cast<float>(d)));
  at::Tensor scores = at::matmul(q, heads[1].transpose(-2, -1)); // [B, H, T, T]
  at::_softmax_out(scores, scores, 3, false);
  const at::Tensor ctx = at::matmul(scores, heads[2]).transpose(1, 2).reshape({b, t, e});
  return {proj_->run(ctx), at::Tensor()};
}

} // namespace xalloc::runtime
