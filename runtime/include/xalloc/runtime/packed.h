// Frozen weights laid out once for oneDNN: a convolution whose weight is reordered into the
// blocked format oneDNN's kernel wants (once per input shape, never per call), run on
// channels-last activations with the activation after it fused into the same pass; and, for
// models that are run in oneDNN's own blocked tensors (`aten::to_mkldnn` regions), constants that
// survive torch.jit.save and load (the MKLDNN tensors libtorch's own pass makes do not).
//
// TorchScript (registered when libxalloc_runtime.so loads; xrewrite writes them for regions
// planned `channels_last` with prepacked weights, or `blocked`):
//   xalloc::conv2d_packed(Tensor x, __torch__.torch.classes.xalloc.PackedConv w) -> Tensor
//   xalloc::linear_packed(Tensor x, __torch__.torch.classes.xalloc.PackedLinear w) -> Tensor
//   xalloc::mkldnn_constant(__torch__.torch.classes.xalloc.MkldnnConstant c) -> Tensor
//   xalloc::broadcast_mkldnn(Tensor a, Tensor b) -> (Tensor, Tensor)
//
// Both classes pickle their dense weight and parameters; loading lays the weight out again.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/custom_class.h>

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

/// A 2-D convolution (any groups, stride, padding, dilation) with its weight packed for oneDNN.
struct PackedConv : torch::CustomClassHolder {
  PackedConv(at::Tensor weight, c10::optional<at::Tensor> bias, std::vector<std::int64_t> stride,
             std::vector<std::int64_t> padding, std::vector<std::int64_t> dilation,
             std::int64_t groups, std::string post_op);
  ~PackedConv() override;

  /// The convolution of x (N, C, H, W; any layout, channels-last is read in place) followed by
  /// the post-op: a channels-last output.
  at::Tensor run(const at::Tensor& x);

  using State =
      std::tuple<at::Tensor, c10::optional<at::Tensor>, std::vector<std::int64_t>,
                 std::vector<std::int64_t>, std::vector<std::int64_t>, std::int64_t, std::string>;
  State state() const;

  at::Tensor weight;
  c10::optional<at::Tensor> bias;
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups = 1;
  PostOp post = PostOp::None;

private:
  struct Prepared;
  const Prepared& prepare(const at::Tensor& x);
  std::mutex mutex_;
  std::vector<std::unique_ptr<Prepared>> prepared_; // one per input shape seen
};

/// A linear (x W^T + b) with its weight packed for oneDNN's inner product, the activation after
/// it fused: what a frozen linear's weight becomes when re-laid for oneDNN (the inputs stay
/// row-major; any leading dimensions are flattened into rows).
struct PackedLinear : torch::CustomClassHolder {
  PackedLinear(at::Tensor weight, c10::optional<at::Tensor> bias, std::string post_op);
  ~PackedLinear() override;
  at::Tensor run(const at::Tensor& x);

  using State = std::tuple<at::Tensor, c10::optional<at::Tensor>, std::string>;
  State state() const;

  at::Tensor weight; // [out, in]
  c10::optional<at::Tensor> bias;
  PostOp post = PostOp::None;

private:
  struct Prepared;
  const Prepared& prepare(std::int64_t rows);
  std::mutex mutex_;
  std::vector<std::unique_ptr<Prepared>> prepared_; // one per number of rows seen
};

/// A constant of a blocked (oneDNN) region: the dense tensor as saved, and the MKLDNN tensor
/// made from it once at construction (for a convolution's weight, reordered as
/// `mkldnn_reorder_conv2d_weight` does, exactly what torch's frozen-ops-to-MKLDNN pass does).
struct MkldnnConstant : torch::CustomClassHolder {
  /// `conv` empty: a plain to_mkldnn (a bias, a linear's weight); else [padding.., stride..,
  /// dilation.., groups] of the convolution whose weight this is (2-D: 7 numbers).
  MkldnnConstant(at::Tensor dense, std::vector<std::int64_t> conv);
  at::Tensor dense;
  std::vector<std::int64_t> conv;
  at::Tensor mkldnn;
};

} // namespace xalloc::runtime
