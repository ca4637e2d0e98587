// Frozen weights laid out once for oneDNN: a convolution whose weight is reordered into the
// blocked format oneDNN's kernel wants (once per input shape, never per call), run on
// channels-last activations with the activation after it fused into the same pass; and, for
// models that are run in oneDNN's own blocked tensors (`aten::to_mkldnn` regions), constants that
// survive torch.jit.save and load (the MKLDNN tensors libtorch's own pass makes do not).
//
// TorchScript (registered when libxalloc_runtime.so loads; xrewrite writes them for regions
// planned `channels_last` with prepacked weights, or `blocked`):
//   xalloc::conv2d_packed(Tensor x, __torch__.torch.classes.xalloc.PackedConv w) -> Tensor
//   xalloc::conv2d_packed_add(Tensor x, __torch__.torch.classes.xalloc.PackedConv w,
//                             Tensor residual) -> Tensor
//   xalloc::conv3d_packed(...), xalloc::conv3d_packed_add(...): the same for a 3-D one
//   xalloc::linear_packed(Tensor x, __torch__.torch.classes.xalloc.PackedLinear w) -> Tensor
//   xalloc::attention_packed(Tensor query, Tensor key, Tensor value,
//                            __torch__.torch.classes.xalloc.PackedAttention a, Tensor? mask,
//                            bool need_weights, bool average_attn_weights, int? mask_type)
//                            -> (Tensor, Tensor)
//   xalloc::mkldnn_constant(__torch__.torch.classes.xalloc.MkldnnConstant c) -> Tensor
//   xalloc::broadcast_mkldnn(Tensor a, Tensor b) -> (Tensor, Tensor)
//
// The classes pickle their dense weights and parameters; loading lays the weights out again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/custom_class.h>

#include "xalloc/runtime/lru_cache.h"

namespace xalloc::runtime {

/// The activations oneDNN can apply to a convolution's output in the same pass, by the ATen op
/// they replace.
enum class PostOp { None, Relu, Silu, Hardswish, Sigmoid, Gelu, Relu6, Hardsigmoid, Tanh };

/// "relu" -> PostOp::Relu ...; nullopt for a name it does not know.
std::optional<PostOp> parsePostOp(const std::string& name);
const char* postOpName(PostOp p);
/// The post-op that fuses the ATen op `kind` ("aten::relu_", "aten::silu", "aten::hardtanh" with
/// 0..6 is checked by the caller as relu6, ...); nullopt when it cannot be fused.
std::optional<PostOp> postOpForAten(const std::string& kind);

/// True when the runtime was built with oneDNN (conv2d_packed and linear_packed exist).
bool hasPackedConv();

/// How many input shapes each packed op keeps prepared (a oneDNN primitive, and the weight
/// packed for it, per input shape; shapes whose primitives read the same packed layout share one
/// copy of the weight): `XALLOC_PACKED_CACHE`, a whole number from 1 to 4096, default 8; the
/// least recently used shape is dropped beyond it, for a new shape asked for more often lately
/// than that one; a rarer one is computed by ATen's op (lru_cache.h: a rotation over many
/// shapes keeps 8 prepared instead of preparing each on every call). Read at the first packed
/// call.
std::size_t packedCacheCapacity();
/// Sets it for packed ops made from now on (1 to 4096), for C++ callers and tests.
void setPackedCacheCapacity(std::size_t shapes);

/// How many of the caller's `threads` (at::get_num_threads()) a packed op of so many
/// multiply-adds runs oneDNN on: one per `XALLOC_PACKED_WORK_PER_THREAD` of them (default
/// 150000, ~10 us of a small convolution's work; 0: every thread), at least one, at most
/// `threads`. Splitting work as ONNX Runtime's MLAS does by an op's cost: a 1x1 convolution of
/// one pixel ran 2.5 us on one thread and 22 us on two. Chosen when a shape is prepared (the
/// variable is read then); the result does not depend on it.
int packedThreads(double multiply_adds, int threads);

/// The ATen ops a post-op stands for, applied to y (what the rewritten graph replaced).
at::Tensor applyPostOp(const at::Tensor& y, PostOp p);

/// The contract every packed op keeps (docs/runtime-ops.md):
/// - many threads may call one op at once: the prepared primitives are shared read-only behind a
///   bounded LRU (packedCacheCapacity), and each call brings its own oneDNN scratchpad (user
///   mode; Debian's libdnnl otherwise shares one per primitive, and wrong results come back);
/// - an input ATen refuses is refused with ATen's kind of message, and edge shapes (an empty
///   batch, zero input features) give ATen's result;
/// - NaN and infinity come out where ATen's do: an input that is not finite, or so large that a
///   reordered sum could overflow where ATen's would not, is computed by ATen's own ops
///   (`reference`), as it is when gradients are wanted (grad mode on and the input requiring
///   grad): the output then carries ATen's autograd history, never a detached result;
/// - every argument is checked at construction (so also when a model file is loaded): sizes,
///   dtypes, strides, dilations, padding, groups, and that each tensor's storage holds what its
///   sizes reach; a weight not on the CPU (a model loaded with map_location="meta") is refused
///   when the op is called.

/// A weight packed into a layout one of oneDNN's kernels reads (packed_conv.cpp); shapes whose
/// kernels read the same layout share one.
struct PackedWeights;

/// What bounds a packed op's sums: the largest sum of |w| over one output's weights, and the
/// largest |b| (+inf when one is not finite; 0 for a weight not on the CPU, never run).
struct SumBounds {
  double weights = 0;
  double bias = 0;
};

/// A 2-D or 3-D convolution (any groups, stride, padding, dilation; a 4-D or 5-D weight) with its
/// weight packed for oneDNN, reading and writing channels-last activations (NHWC, NDHWC).
/// Its post-op is an activation's name ("relu", "none", ...), or "add" / "add+<activation>":
/// a residual added to the convolution's output before the activation, in the same pass
/// (oneDNN's sum post-op into an output that holds the residual; runAdd,
/// xalloc::conv2d_packed_add).
struct PackedConv : torch::CustomClassHolder {
  PackedConv(at::Tensor weight, c10::optional<at::Tensor> bias, std::vector<std::int64_t> stride,
             std::vector<std::int64_t> padding, std::vector<std::int64_t> dilation,
             std::int64_t groups, std::string post_op);
  ~PackedConv() override;

  /// The convolution of x (N, C, H, W, or C, H, W unbatched; N, C, D, H, W for a 3-D one; any
  /// layout, channels-last is read in place) followed by the post-op: a channels-last output.
  /// Refused when it adds a residual.
  at::Tensor run(const at::Tensor& x);
  /// post(conv(x) + residual), for a convolution made with an "add" post-op: the residual
  /// copied into the output, which the convolution is added to, when it is a float32 CPU tensor
  /// of the output's sizes (any layout); any other
  /// residual (broadcast, another dtype) gets ATen's conv2d, add and activation, as does one
  /// that is not finite when the activation turns NaN into a number.
  at::Tensor runAdd(const at::Tensor& x, const at::Tensor& residual);
  /// runAdd into `residual` itself where it is a channels-last float32 tensor of the output's
  /// sizes that no one else holds (this handle the only one of its tensor and storage): the
  /// TorchScript op passes a value at its last use so, and the copy goes. Held elsewhere, it is
  /// runAdd.
  at::Tensor runAddInto(const at::Tensor& x, at::Tensor&& residual);
  /// The same with ATen's conv2d or conv3d and activation (and add).
  at::Tensor reference(const at::Tensor& x) const;
  at::Tensor referenceAdd(const at::Tensor& x, const at::Tensor& residual) const;

  using State =
      std::tuple<at::Tensor, c10::optional<at::Tensor>, std::vector<std::int64_t>,
                 std::vector<std::int64_t>, std::vector<std::int64_t>, std::int64_t, std::string>;
  State state() const;
  /// Input shapes prepared now (at most packedCacheCapacity()), and distinct packed weights.
  std::size_t preparedShapes() const;
  std::size_t packedWeights() const;
  /// 2 or 3: the convolution's spatial dimensions (the weight's, less out and in).
  std::int64_t spatialDims() const;
  /// A 1x1 (1x1x1) convolution of stride 1, no padding and one group: one GEMM per call.
  bool pointwise() const;
  /// A 2-D convolution with one filter per channel (groups = in = out channels): the
  /// runtime's own kernel (depthwise_nhwc.h).
  bool depthwise() const;
  /// Refuses a call through the op of the other rank (xalloc::conv2d_packed on a 3-D one).
  void checkCalledAs(std::int64_t dims, bool add) const;

  at::Tensor weight;
  c10::optional<at::Tensor> bias;
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups = 1;
  PostOp post = PostOp::None;
  bool residual = false; // adds a residual before `post` ("add+relu")

  struct Prepared;

private:
  std::shared_ptr<const Prepared> prepare(const at::Tensor& x);
  at::Tensor runChecked(const at::Tensor& x_in, const at::Tensor* residual,
                        bool write_residual = false);
  at::Tensor atenConv(const at::Tensor& x) const; // ATen's conv2d or conv3d, no post-op
  LruCache<std::vector<std::int64_t>, Prepared> cache_;
  mutable std::mutex weights_mutex_;
  std::vector<std::weak_ptr<PackedWeights>> weights_; // packed layouts in use by cached shapes
  SumBounds bounds_;
};

/// A squeeze-and-excitation block, `x * expand(reduce(adaptive_avg_pool2d(x, 1)))`, as one op
/// (xalloc::squeeze_excite, squeeze_excite.cpp): the channel means and the scaling are the
/// runtime's on a channels-last float input, the original ops on any other.
at::Tensor squeezeExcite(const at::Tensor& x, const c10::intrusive_ptr<PackedConv>& reduce,
                         const c10::intrusive_ptr<PackedConv>& expand);
/// The same, scaling `x` in place where this handle is the only one of its tensor and storage
/// (the TorchScript op passes a value at its last use so); held elsewhere, a new tensor.
at::Tensor squeezeExciteInto(at::Tensor&& x, const c10::intrusive_ptr<PackedConv>& reduce,
                             const c10::intrusive_ptr<PackedConv>& expand);

/// A linear (x W^T + b) with its weight packed for oneDNN's inner product, the activation after
/// it fused: what a frozen linear's weight becomes when re-laid for oneDNN (the inputs stay
/// row-major; any leading dimensions are flattened into rows).
struct PackedLinear : torch::CustomClassHolder {
  PackedLinear(at::Tensor weight, c10::optional<at::Tensor> bias, std::string post_op);
  ~PackedLinear() override;
  at::Tensor run(const at::Tensor& x);
  at::Tensor reference(const at::Tensor& x) const;

  using State = std::tuple<at::Tensor, c10::optional<at::Tensor>, std::string>;
  State state() const;
  std::size_t preparedShapes() const;
  std::size_t packedWeights() const;
  at::Tensor weight; // [out, in]
  c10::optional<at::Tensor> bias;
  PostOp post = PostOp::None;

  struct Prepared;

private:
  std::shared_ptr<const Prepared> prepare(std::int64_t rows);
  LruCache<std::pair<std::int64_t, std::int64_t>, Prepared> cache_; // rows, threads
  mutable std::mutex weights_mutex_;
  std::vector<std::weak_ptr<PackedWeights>> weights_;
  SumBounds bounds_;
};

/// Self-attention with frozen projections: what aten::_native_multi_head_attention (the fast
/// path of nn.MultiheadAttention in eval mode) computes, with both projections packed for
/// oneDNN's inner product and the two batched products of the heads run by oneDNN's matmul
/// straight from the projection's output (no copy per head). Anything but its fast path's case
/// (one tensor as query, key and value; float32, 3-D, not empty; no mask; no weights wanted;
/// no gradient wanted; finite and far from overflow) runs ATen's own op on the stored weights, so
/// ATen's results, errors and NaN are what the caller gets there.
struct PackedAttention : torch::CustomClassHolder {
  PackedAttention(std::int64_t embed_dim, std::int64_t num_heads, at::Tensor qkv_weight,
                  at::Tensor qkv_bias, at::Tensor proj_weight, at::Tensor proj_bias);
  ~PackedAttention() override;

  /// _native_multi_head_attention's arguments after the weights; (output, weights) where the
  /// weights are undefined unless asked for, as ATen's.
  std::tuple<at::Tensor, at::Tensor> run(const at::Tensor& query, const at::Tensor& key,
                                         const at::Tensor& value,
                                         const c10::optional<at::Tensor>& mask, bool need_weights,
                                         bool average_attn_weights,
                                         c10::optional<std::int64_t> mask_type);
  std::tuple<at::Tensor, at::Tensor> reference(const at::Tensor& query, const at::Tensor& key,
                                               const at::Tensor& value,
                                               const c10::optional<at::Tensor>& mask,
                                               bool need_weights, bool average_attn_weights,
                                               c10::optional<std::int64_t> mask_type) const;

  using State =
      std::tuple<std::int64_t, std::int64_t, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
  State state() const;
  /// (batch, tokens) shapes prepared now (at most packedCacheCapacity()).
  std::size_t preparedShapes() const;

  std::int64_t embed_dim = 0, num_heads = 0;
  at::Tensor qkv_weight, qkv_bias, proj_weight, proj_bias; // as stored

  struct Prepared;

private:
  std::shared_ptr<const Prepared> prepare(std::int64_t batch, std::int64_t tokens);
  c10::intrusive_ptr<PackedLinear> qkv_, proj_;
  LruCache<std::tuple<std::int64_t, std::int64_t, std::int64_t>, Prepared> cache_; // b, t, threads
  SumBounds qkv_bounds_, proj_bounds_;
};

/// A constant of a blocked (oneDNN) region: the dense tensor as saved, and the MKLDNN tensor
/// made from it once at construction (for a convolution's weight, reordered as
/// `mkldnn_reorder_conv2d_weight` / `mkldnn_reorder_conv3d_weight` do, exactly what torch's
/// frozen-ops-to-MKLDNN pass does).
struct MkldnnConstant : torch::CustomClassHolder {
  /// `conv` empty: a plain to_mkldnn (a bias, a linear's weight); else [padding.., stride..,
  /// dilation.., groups] of the convolution whose weight this is (2-D: 7 numbers, 3-D: 10), each
  /// checked
  /// (padding >= 0, stride, dilation and groups >= 1, groups dividing the outputs). A tensor not
  /// on the CPU is kept as it is and refused when the constant is used.
  MkldnnConstant(at::Tensor dense, std::vector<std::int64_t> conv);
  /// The MKLDNN tensor (an error when the dense tensor was not on the CPU).
  const at::Tensor& get() const;
  at::Tensor dense;
  std::vector<std::int64_t> conv;
  at::Tensor mkldnn;
};

} // namespace xalloc::runtime
