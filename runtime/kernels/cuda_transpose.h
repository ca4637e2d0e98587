// The CUDA conversion kernel for (batched) 2-D transposes; see cuda_transpose.cu. Plain CUDA:
// no libtorch here, so nvcc compiles it without the framework's headers.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "transpose.h"

namespace xalloc::runtime {

/// Launches the transpose of 1-, 2-, 4- or 8-byte (`item`) elements on `stream`: the contiguous
/// [batch, rows, cols] output of a source laid out as Transpose describes. Returns the launch's
/// error (cudaErrorInvalidValue for another element size).
cudaError_t launchTranspose(const void* in, void* out, std::size_t item, const Transpose& tr,
                            cudaStream_t stream);

} // namespace xalloc::runtime
