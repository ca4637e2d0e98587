// What the packed ops check of their arguments and inputs, and the thread-local oneDNN
// scratchpad each call brings (packed.h states the contract).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "xalloc/runtime/packed.h"

namespace xalloc::runtime::detail {

/// A tensor argument of a packed class: defined, strided, float32 unless `any_dtype`, and a
/// storage that holds every element its sizes, strides and offset reach (a model file can say
/// anything). `who` and `what` name it in the message ("xalloc.PackedConv", "weight").
void checkStoredTensor(const at::Tensor& t, const char* who, const char* what);

/// A tensor the op will read now: on the CPU (a meta or CUDA tensor is refused in one line
/// that says how the model was probably loaded).
void checkOnCpu(const at::Tensor& t, const char* who, const char* what);

/// An op input: defined, a strided CPU tensor of float32 (ATen's kind of message otherwise).
void checkInput(const at::Tensor& x, const char* op);

/// A conv's stride, padding and dilation (`dims` numbers each, two for a 2-D convolution: >= 1,
/// >= 0, >= 1, below 2^31) and groups (>= 1, dividing `outputs`), in ATen's words.
void checkConvParams(const char* who, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation, std::int64_t groups, std::int64_t outputs,
                     std::size_t dims = 2);

/// The bias of a packed op checked (a stored float32 tensor, one value per output) and the
/// post-op parsed; the weight and the bias made contiguous. Returns the post-op.
PostOp checkBiasAndPostOp(const char* who, at::Tensor& weight, c10::optional<at::Tensor>& bias,
                          const std::string& post_op);

/// The weight's and bias's SumBounds (with every |x| <= m, no partial sum of an output exceeds
/// m * weights + bias, in any order of summation); zero when the weight is not on the CPU.
SumBounds sumBounds(const at::Tensor& weight, const c10::optional<at::Tensor>& bias);

/// oneDNN computes relu, clip and the hard sigmoid's clip as max(x, 0) with NaN losing: NaN in,
/// a number out, where ATen's activations keep NaN.
inline bool eatsNaN(PostOp p) {
  return p == PostOp::Relu || p == PostOp::Relu6 || p == PostOp::Hardsigmoid;
}

/// True when the input must take ATen's path: gradients wanted (grad mode on and x requiring
/// grad, or a forward-mode tangent); and, for a fused activation that would differ from
/// ATen's at the extremes, an input that is not finite, or so large that the output could
/// reach them: oneDNN's relu, clip and hard sigmoid turn NaN into a number (and a sum
/// overflowing in another order, then NaN, into 0); ATen's hardswish computes x * 6 first, so
/// it overflows to inf above 3.4e38 / 6 where oneDNN's stays finite. x must be dense.
/// `input_bound`, when given, gets the largest |x| known: noted by the packed op that made x, or
/// found by the scan here; infinity when neither.
bool needsReference(const at::Tensor& x, PostOp post, const SumBounds& bounds,
                    double* input_bound = nullptr);

/// What a packed op knows of a tensor it made: every element finite and at most `bound` in
/// magnitude. A note holds while that tensor object lives with its version counter (which
/// every in-place op of ATen's moves) and data pointer unchanged; the next packed op that reads
/// it trusts the note instead of scanning it. The calling thread keeps its last 16 notes; a
/// bound that is not finite (or at float's range) forgets the tensor's note instead.
void noteBound(const at::Tensor& t, double bound);
/// The bound noted for `t` by this thread, if one holds.
std::optional<double> knownBound(const at::Tensor& t);
/// An activation's largest |y| given |x| <= bound for its input x.
double postOpBound(PostOp p, double bound);
/// True when `t` is the only handle of its tensor object and of its storage: nothing can read
/// it after the caller is done (a Python variable, a later reader in a graph or a view would
/// hold another). The boxed ops pop their inputs off the interpreter's stack, so a value passed
/// at its last use arrives so, and they may write it instead of making a new tensor.
bool ownedAlone(const at::Tensor& t);
/// Marks `t` written in place, as ATen's in-place ops do: its version counter moves (and a
/// bound any thread noted for it no longer holds).
void markWritten(const at::Tensor& t);
/// The gradient part of needsReference alone.
bool wantsGradient(const at::Tensor& x);

/// A buffer of at least `bytes` (64-byte aligned) owned by the calling thread, reused by its
/// next call: each call's oneDNN scratchpad, so two threads never share one. It grows to the
/// largest size the thread has asked for and is freed when the thread ends.
void* threadScratch(std::size_t bytes);

} // namespace xalloc::runtime::detail
