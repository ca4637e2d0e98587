// The CUDA backend of the async conversion runtime (cuda_async.cpp); async.cpp dispatches CUDA
// tensors here when the runtime is built with XALLOC_WITH_CUDA.
#pragma once

#include <cstddef>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

namespace xalloc::runtime::cuda {

/// contiguous_async on a CUDA tensor: the copy on a high-priority side stream after the
/// producer's work, the future completed with an event the consumer's stream waits on in
/// Future::wait(). `join_now`: the producer's stream waits for the copy at once (the TorchScript
/// op: the interpreter's aten::wait never calls Future::wait() on a completed future).
c10::intrusive_ptr<c10::ivalue::Future> start(const at::Tensor& self, bool join_now);

/// self.contiguous() on the current stream, with the tiled kernel where it applies.
at::Tensor contiguousFast(const at::Tensor& self);

/// Writes self's values into out (contiguous, same sizes, dtype and device), current stream.
void contiguousInto(const at::Tensor& self, at::Tensor& out);

/// True when the tiled kernel converts this layout (a non-contiguous batched 2-D transpose of
/// 1-, 2-, 4- or 8-byte elements on a CUDA device).
bool hasKernel(const at::Tensor& self);

/// Conversions whose inputs and outputs the runtime still holds (their completion event has
/// not been seen yet).
std::size_t inFlight();

} // namespace xalloc::runtime::cuda
