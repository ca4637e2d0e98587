// Asynchronous conversions: `.contiguous()` started now on a side worker and waited for later.
//
// TorchScript: the op `xalloc::contiguous_async(Tensor self) -> Future(Tensor)`, waited on with
// the built-in `aten::wait`, registered when libxalloc_runtime.so is loaded. Load it before
// torch::jit::load of a model that uses it:
//   C++:    xalloc::runtime::loadOps();            (or link libxalloc_runtime.so)
//   Python: torch.ops.load_library(xalloc.library_path())   or   xalloc.load_ops()
//
// Eager C++:
//   auto h = xalloc::runtime::contiguousAsync(x.transpose(0, 1));   // starts the copy
//   ... other work ...
//   at::Tensor y = h.wait();                                         // contiguous, same values
//
// An already-contiguous input completes at once and returns itself. The input is held until the
// copy is done, whatever the caller does with its own references. CPU tensors: a pool of worker
// threads (XALLOC_ASYNC_WORKERS, default 1) completes the future. CUDA tensors (a runtime built
// with XALLOC_WITH_CUDA): the copy runs on a high-priority side stream after the producer's
// work, and wait() makes the caller's current stream wait for it without blocking the host
// (runtime/README.md gives the stream rules).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

namespace xalloc::runtime {

class AsyncHandle {
public:
  AsyncHandle() = default;
  explicit AsyncHandle(c10::intrusive_ptr<c10::ivalue::Future> f) : future_(std::move(f)) {}
  /// Blocks until the conversion is done; rethrows its error.
  at::Tensor wait() const;
  bool done() const { return future_ && future_->completed(); }
  const c10::intrusive_ptr<c10::ivalue::Future>& future() const { return future_; }

private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

AsyncHandle contiguousAsync(const at::Tensor& self);

/// `self.contiguous()`, bit for bit, with a cache-blocked transpose for layouts that are
/// (batched) 2-D transposes of contiguous tensors of 2-, 4- or 8-byte elements; anything else
/// goes to ATen. Outputs of 4 MiB and more are mapped with transparent huge pages asked for.
/// `parallel`: the kernel splits large conversions over libtorch's intra-op threads (what a
/// caller that waits wants); the async worker passes false, leaving the cores to the model.
at::Tensor contiguousFast(const at::Tensor& self, bool parallel = true);

/// Writes self's values into `out` (contiguous, same sizes and dtype), with the blocked kernel
/// when it applies: a conversion into a buffer planned ahead (memplan) or reused.
void contiguousInto(const at::Tensor& self, at::Tensor& out, bool parallel = true);

/// True when contiguousFast uses its own kernel for this layout.
bool hasFastKernel(const at::Tensor& self);

/// Makes sure the ops are registered (they are once the library is loaded; calling this from a
/// program also makes the linker keep the library). Returns the number of xalloc:: ops.
int loadOps();

} // namespace xalloc::runtime
