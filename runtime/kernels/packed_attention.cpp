// xalloc::attention_packed: nn.MultiheadAttention's fast path (aten::_native_multi_head_attention)
// with frozen projections packed for oneDNN (packed.h). ATen's CPU kernel runs the two
// projections on BLAS, copies q, k and v into per-head tensors, runs a batched product per head
// pair and copies the context back; here the projections are packed inner products and oneDNN's
// matmul reads the heads where the projection wrote them and writes the context where the output
// projection reads it. The softmax is ATen's own kernel, run in place as ATen runs it.
#include <cmath>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "finite_scan.h"
#include "packed_checks.h"
#include "xalloc/runtime/packed.h"

#ifdef XALLOC_WITH_DNNL
#include "packed_dnnl.h"
#endif

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

#ifdef XALLOC_WITH_DNNL

using namespace detail;

// The two products of the heads for one (batch, tokens): scores = q k^T / sqrt(head_dim) read
// from the projection's output [B, T, 3E] in place, and context = softmax(scores) v written as
// [B, T, E], heads side by side (ATen's transform_0213 without the copy).
struct PackedAttention::Prepared {
  dnnl::matmul scores, context;
  dnnl::memory::desc q, kt, s, v, ctx, scores_scratch, context_scratch;
};

std::shared_ptr<const PackedAttention::Prepared> PackedAttention::prepare(std::int64_t b,
                                                                          std::int64_t t) {
  // One primitive per thread count, as PackedConv::prepare keeps them.
  const auto key = std::make_tuple(b, t, static_cast<std::int64_t>(at::get_num_threads()));
  if (auto p = cache_.find(key))
    return p;
  if (!cache_.admits(key))
    return nullptr; // rarer than the shapes prepared: ATen's op this time
  using dnnl::memory;
  const auto f32 = memory::data_type::f32;
  const std::int64_t e = embed_dim, h = num_heads, d = e / h, e3 = 3 * e;
  auto p = std::make_shared<Prepared>();
  p->q = memory::desc({b, h, t, d}, f32, memory::dims{t * e3, d, e3, 1});
  p->kt = memory::desc({b, h, d, t}, f32, memory::dims{t * e3, d, 1, e3});
  p->s = memory::desc({b, h, t, t}, f32, memory::dims{h * t * t, t * t, t, 1});
  p->v = memory::desc({b, h, t, d}, f32, memory::dims{t * e3, d, e3, 1});
  p->ctx = memory::desc({b, h, t, d}, f32, memory::dims{t * e, d, e, 1});
  // ATen scales q by 1/sqrt(head_dim), computed in float, before the product; here the product.
  dnnl::primitive_attr scaled = userScratchpad(PostOp::None);
  scaled.set_output_scales(0, {1.0f / std::sqrt(static_cast<float>(d))});
  const dnnl::matmul::primitive_desc s_pd(dnnl::matmul::desc(p->q, p->kt, p->s), scaled, engine());
  const dnnl::matmul::primitive_desc c_pd(dnnl::matmul::desc(p->s, p->v, p->ctx),
                                          userScratchpad(PostOp::None), engine());
  p->scores = dnnl::matmul(s_pd);
  p->context = dnnl::matmul(c_pd);
  p->scores_scratch = s_pd.scratchpad_desc();
  p->context_scratch = c_pd.scratchpad_desc();
  return cache_.insert(key, std::move(p));
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
  at::Tensor scores = at::empty({b, num_heads, t, t}, x.options());
  at::Tensor ctx = at::empty({b, t, e}, x.options());
  float* base = qkv.data_ptr<float>();
  execute(p->scores, p->scores_scratch,
          {{DNNL_ARG_SRC, dnnl::memory(p->q, engine(), base)},
           {DNNL_ARG_WEIGHTS, dnnl::memory(p->kt, engine(), base + e)},
           {DNNL_ARG_DST, dnnl::memory(p->s, engine(), scores.data_ptr())}});
  at::_softmax_out(scores, scores, 3, false);
  execute(p->context, p->context_scratch,
          {{DNNL_ARG_SRC, dnnl::memory(p->s, engine(), scores.data_ptr())},
           {DNNL_ARG_WEIGHTS, dnnl::memory(p->v, engine(), base + 2 * e)},
           {DNNL_ARG_DST, dnnl::memory(p->ctx, engine(), ctx.data_ptr())}});
  return {proj_->run(ctx), at::Tensor()};
}

#else

struct PackedAttention::Prepared {};

std::tuple<at::Tensor, at::Tensor> PackedAttention::run(const at::Tensor&, const at::Tensor&,
                                                        const at::Tensor&,
                                                        const c10::optional<at::Tensor>&, bool,
                                                        bool, c10::optional<std::int64_t>) {
  TORCH_CHECK(false, "xalloc::attention_packed: this runtime was built without oneDNN");
}

#endif

} // namespace xalloc::runtime
