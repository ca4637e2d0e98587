// The async conversion runtime's CPU backend: a worker pool, the cache-blocked transpose, and
// the TorchScript op xalloc::contiguous_async.
#include "xalloc/runtime/async.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "xalloc/runtime/worker_pool.h"

namespace xalloc::runtime {

namespace {

int workersFromEnvironment() {
  const char* v = std::getenv("XALLOC_ASYNC_WORKERS");
  const int n = v ? std::atoi(v) : 1;
  return std::clamp(n, 1, 64);
}

WorkerPool& pool() {
  // Never destroyed: jobs may still be queued while static destructors run.
  static WorkerPool* p = new WorkerPool(workersFromEnvironment());
  return *p;
}

// A batched 2-D transpose of a dense tensor: out[b][i][j] = in[b*bs + i + j*rows], i.e. after
// merging dimensions the layout is [batch, rows, cols] with strides [rows*cols, 1, rows].
struct Transpose {
  std::int64_t batch = 1, rows = 0, cols = 0, batch_stride = 0;
};

std::optional<Transpose> asTranspose(const at::Tensor& t) {
  if (t.is_contiguous() || !t.device().is_cpu() || t.is_neg() || t.is_conj() || t.numel() < 4096)
    return std::nullopt;
  // 4- and 8-byte elements: for 1 and 2 bytes ATen's kernel is as fast or faster here.
  const auto item = t.element_size();
  if (item != 4 && item != 8)
    return std::nullopt;
  // Merge neighbours that are contiguous with each other in the source (output order).
  std::vector<std::pair<std::int64_t, std::int64_t>> m; // (size, stride)
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    const std::int64_t s = t.size(d), st = t.stride(d);
    if (s == 1)
      continue;
    if (!m.empty() && m.back().second == st * s)
      m.back() = {m.back().first * s, st};
    else
      m.emplace_back(s, st);
  }
  Transpose tr;
  if (m.size() == 3) {
    tr.batch = m[0].first;
    tr.batch_stride = m[0].second;
    m.erase(m.begin());
  }
  if (m.size() != 2)
    return std::nullopt;
  // A plain 2-D transpose of a 2-D tensor takes ATen's own blocked path (faster than this one
  // when it fits in cache); the batched ones go to ATen's strided loop, which this beats.
  if (tr.batch == 1 && t.dim() == 2)
    return std::nullopt;
  tr.rows = m[0].first;
  tr.cols = m[1].first;
  if (m[0].second != 1 || m[1].second != tr.rows)
    return std::nullopt;
  if (tr.batch > 1 && tr.batch_stride != tr.rows * tr.cols)
    return std::nullopt;
  return tr;
}

// 16x16 tiles, walking the source's rows in the outer loop: a tile's 16 source lines (one per
// source row) and 16 destination lines stay in L1, and the source pages in use stay few (on
// this machine, 2x ATen's strided copy on large transposes; see bench/kernel_bench.cpp).
template <typename T> void transposeKernel(const T* in, T* out, const Transpose& tr) {
  constexpr std::int64_t kTile = 16;
  for (std::int64_t b = 0; b < tr.batch; ++b) {
    const T* src = in + b * tr.batch_stride;
    T* dst = out + b * tr.rows * tr.cols;
    for (std::int64_t j0 = 0; j0 < tr.cols; j0 += kTile) {
      const std::int64_t j1 = std::min(j0 + kTile, tr.cols);
      for (std::int64_t i0 = 0; i0 < tr.rows; i0 += kTile) {
        const std::int64_t i1 = std::min(i0 + kTile, tr.rows);
        for (std::int64_t i = i0; i < i1; ++i) {
          T* d = dst + i * tr.cols;
          const T* s = src + i;
          for (std::int64_t j = j0; j < j1; ++j)
            d[j] = s[j * tr.rows];
        }
      }
    }
  }
}

c10::intrusive_ptr<c10::ivalue::Future> start(const at::Tensor& self) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  if (self.is_contiguous()) {
    future->markCompleted(self);
    return future;
  }
  // The job holds the input (a reference to its storage) until the copy is done.
  pool().submit([self, future] {
    try {
      future->markCompleted(contiguousFast(self));
    } catch (...) {
      future->setError(std::current_exception());
    }
  });
  return future;
}

const torch::jit::RegisterOperators registry({torch::jit::Operator(
    "xalloc::contiguous_async(Tensor self) -> Future(Tensor)",
    [](torch::jit::Stack& stack) {
      at::Tensor self = torch::jit::pop(stack).toTensor();
      torch::jit::push(stack, start(self));
    },
    c10::AliasAnalysisKind::CONSERVATIVE)});

} // namespace

bool hasFastKernel(const at::Tensor& self) {
  return asTranspose(self).has_value();
}

at::Tensor contiguousFast(const at::Tensor& self) {
  auto tr = asTranspose(self);
  if (!tr)
    return self.contiguous();
  at::Tensor out =
      at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
  const void* in = static_cast<const char*>(self.data_ptr());
  void* o = out.data_ptr();
  switch (self.element_size()) {
  case 4:
    transposeKernel(static_cast<const std::uint32_t*>(in), static_cast<std::uint32_t*>(o), *tr);
    break;
  default:
    transposeKernel(static_cast<const std::uint64_t*>(in), static_cast<std::uint64_t*>(o), *tr);
    break;
  }
  return out;
}

at::Tensor AsyncHandle::wait() const {
  TORCH_CHECK(future_, "xalloc: wait() on an empty AsyncHandle");
  future_->wait();
  if (future_->hasError())
    std::rethrow_exception(future_->exception_ptr());
  return future_->value().toTensor();
}

AsyncHandle contiguousAsync(const at::Tensor& self) {
  return AsyncHandle(start(self));
}

int loadOps() {
  int n = 0;
  for (const auto& op : torch::jit::getAllOperators())
    n += op->schema().name().rfind("xalloc::", 0) == 0;
  return n;
}

} // namespace xalloc::runtime
