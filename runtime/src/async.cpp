// The async conversion runtime's CPU backend: a worker pool, the cache-blocked transpose, and
// the TorchScript ops xalloc::contiguous_async and xalloc::contiguous. CUDA tensors go to the
// CUDA backend (cuda_async.cpp) when the runtime is built with XALLOC_WITH_CUDA.
#include "xalloc/runtime/async.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>

#include <ATen/ATen.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "transpose.h"
#ifdef XALLOC_WITH_CUDA
#include "cuda_async.h"
#endif
#include "xalloc/runtime/output_alloc.h"
#include "xalloc/runtime/worker_pool.h"

#include "xalloc/runtime/env_count.h"

namespace xalloc::runtime {

namespace {

int workersFromEnvironment() {
  return static_cast<int>(envCount("XALLOC_ASYNC_WORKERS", 1, 1, 64, "worker threads"));
}

WorkerPool& pool() {
  // Never destroyed: jobs may still be queued while static destructors run.
  static WorkerPool* p = new WorkerPool(workersFromEnvironment());
  return *p;
}

std::optional<Transpose> asTranspose(const at::Tensor& t) {
  if (t.is_contiguous() || !t.device().is_cpu() || t.is_neg() || t.is_conj() || t.numel() < 4096)
    return std::nullopt;
  // 2-, 4- and 8-byte elements: for bytes ATen's kernel is as fast here.
  const auto item = t.element_size();
  if (item != 2 && item != 4 && item != 8)
    return std::nullopt;
  auto tr = asBatchedTranspose(t.sizes().data(), t.strides().data(), t.dim());
  // Matrices cut from wider ones, or under several batch dimensions, need rows of 16 bytes at
  // least (one register of the micro-kernel); narrower ones gather like ATen's loop does.
  if (tr && (tr->ld != tr->rows || tr->batch_dims > 1) && tr->rows * item < 16)
    return std::nullopt;
  return tr;
}

// `from_graph`: started by the TorchScript op, whose consumer is the interpreter's aten::wait
// (on CUDA the copy then joins the producer's stream at once; see cuda_async.cpp).
c10::intrusive_ptr<c10::ivalue::Future> start(const at::Tensor& self, bool from_graph) {
#ifdef XALLOC_WITH_CUDA
  if (self.is_cuda())
    return cuda::start(self, /*join_now=*/from_graph);
#else
  (void)from_graph;
#endif
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  if (self.is_contiguous()) {
    future->markCompleted(self);
    return future;
  }
  // The job holds the input (a reference to its storage) until the copy is done.
  pool().submit([self, future] {
    try {
      future->markCompleted(contiguousFast(self, /*parallel=*/false));
    } catch (...) {
      future->setError(std::current_exception());
    }
  });
  return future;
}

const torch::jit::RegisterOperators
    registry({torch::jit::Operator(
                  "xalloc::contiguous_async(Tensor self) -> Future(Tensor)",
                  [](torch::jit::Stack& stack) {
                    at::Tensor self = torch::jit::pop(stack).toTensor();
                    torch::jit::push(stack, start(self, /*from_graph=*/true));
                  },
                  c10::AliasAnalysisKind::CONSERVATIVE),
              // The fast form's sync conversion: aten::contiguous with the runtime's kernel and
              // output memory; like it, returns its input when that is contiguous already.
              torch::jit::Operator(
                  "xalloc::contiguous(Tensor(a) self) -> Tensor(a)",
                  [](torch::jit::Stack& stack) {
                    at::Tensor self = torch::jit::pop(stack).toTensor();
                    torch::jit::push(stack, contiguousFast(self));
                  },
                  c10::AliasAnalysisKind::FROM_SCHEMA)});

} // namespace

bool hasFastKernel(const at::Tensor& self) {
#ifdef XALLOC_WITH_CUDA
  if (self.is_cuda())
    return cuda::hasKernel(self);
#endif
  return asTranspose(self).has_value();
}

at::Tensor contiguousFast(const at::Tensor& self, bool parallel) {
#ifdef XALLOC_WITH_CUDA
  if (self.is_cuda())
    return cuda::contiguousFast(self);
#endif
  // Dense CPU tensors without lazy negation/conjugation or autograd history get an output of
  // their own (huge pages when large, see output_alloc.h); anything else is ATen's business.
  if (self.is_contiguous() || !self.device().is_cpu() || self.layout() != at::kStrided ||
      self.is_quantized() || self.is_neg() || self.is_conj() || self.requires_grad())
    return self.contiguous();
  at::Tensor out = emptyOutput(self);
  contiguousInto(self, out, parallel);
  return out;
}

void contiguousInto(const at::Tensor& self, at::Tensor& out, bool parallel) {
  TORCH_CHECK(out.is_contiguous() && out.sizes() == self.sizes() &&
                  out.scalar_type() == self.scalar_type() && out.device() == self.device(),
              "xalloc: contiguousInto needs a contiguous output of the input's sizes and dtype");
#ifdef XALLOC_WITH_CUDA
  if (self.is_cuda())
    return cuda::contiguousInto(self, out);
#endif
  auto tr = asTranspose(self);
  if (tr && !self.requires_grad())
    transpose(self.data_ptr(), out.data_ptr(), static_cast<std::size_t>(self.element_size()), *tr,
              parallel);
  else
    out.copy_(self); // what contiguous() runs, into this output
}

at::Tensor AsyncHandle::wait() const {
  TORCH_CHECK(future_, "xalloc: wait() on an empty AsyncHandle");
  future_->wait();
  if (future_->hasError())
    std::rethrow_exception(future_->exception_ptr());
  return future_->value().toTensor();
}

AsyncHandle contiguousAsync(const at::Tensor& self) {
  return AsyncHandle(start(self, /*from_graph=*/false));
}

int loadOps() {
  int n = 0;
  for (const auto& op : torch::jit::getAllOperators())
    n += op->schema().name().rfind("xalloc::", 0) == 0;
  return n;
}

} // namespace xalloc::runtime
