// The async conversion runtime's CUDA backend (built with XALLOC_WITH_CUDA, where libtorch has
// CUDA).
//
// contiguous_async on a CUDA tensor, with these stream rules (runtime/README.md):
//   1. The output is allocated on the launching (producer's current) stream, so the caching
//      allocator ties its block to the stream that will read it.
//   2. An event is recorded on the producer's stream and one of a small fixed set of
//      high-priority side streams waits on it: the copy starts after the producer's work.
//   3. The copy runs on the side stream (the tiled kernel of cuda_transpose.cu for batched 2-D
//      transposes, ATen's copy otherwise), and a completion event is recorded after it.
//   4. Input and output are held by the runtime until that event has completed (a reaper
//      thread polls it), whatever the caller does with its own references: neither block can
//      return to the allocator while the side stream may still touch it.
//   5. The future (an ivalue::Future with the device set) is completed at once, its completion
//      event recorded on the side stream. AsyncHandle::wait() (Future::wait) makes the caller's
//      current stream wait on that event, without blocking the host: the copy overlaps whatever
//      the producer's stream runs until then. Waiting on another stream than the producer's
//      falls back to record_stream for the output (the Future does it).
//   6. In a TorchScript graph the consumer is `aten::wait`, and the JIT interpreter's WAIT
//      instruction takes a completed future's value without Future::wait(), so no stream would
//      wait for the copy. The op therefore joins at launch (`join_now`): the producer's stream
//      waits on the completion event right away. Correct on any stream; the copy then overlaps
//      nothing on the producer's stream (GPU work is asynchronous to the host either way).
#include "cuda_async.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda_transpose.h"
#include "transpose.h"
#include "xalloc/runtime/env_count.h"

namespace xalloc::runtime::cuda {

namespace {

int streamsFromEnvironment() {
  return static_cast<int>(envCount("XALLOC_CUDA_STREAMS", 2, 1, 16, "side streams"));
}

/// The side streams of a device: taken once from libtorch's high-priority pool and used round
/// robin, so a program's conversions spread over a known, small set of streams.
c10::cuda::CUDAStream sideStream(c10::DeviceIndex device) {
  static std::mutex mu;
  static std::map<c10::DeviceIndex, std::vector<c10::cuda::CUDAStream>> streams;
  static std::atomic<unsigned> next{0};
  std::lock_guard<std::mutex> g(mu);
  auto& set = streams[device];
  if (set.empty())
    for (int i = 0; i < streamsFromEnvironment(); ++i)
      set.push_back(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device));
  return set[next.fetch_add(1, std::memory_order_relaxed) % set.size()];
}

/// What a conversion in flight holds: its completion event, input and output.
struct InFlight {
  at::cuda::CUDAEvent done;
  at::Tensor in, out;
};

/// Holds conversions in flight until their completion events have completed, then drops them
/// (on its own thread; never destroyed, as work may be in flight while statics are destroyed).
class KeepAlive {
public:
  KeepAlive() : thread_([this] { loop(); }) { thread_.detach(); }
  void add(std::unique_ptr<InFlight> f) {
    {
      std::lock_guard<std::mutex> g(mu_);
      pending_.push_back(std::move(f));
    }
    cv_.notify_one();
  }
  std::size_t pending() {
    std::lock_guard<std::mutex> g(mu_);
    return pending_.size();
  }

private:
  void loop() {
    auto pause = std::chrono::microseconds(5);
    for (;;) {
      std::vector<std::unique_ptr<InFlight>> finished;
      {
        std::unique_lock<std::mutex> g(mu_);
        cv_.wait(g, [this] { return !pending_.empty(); });
        for (auto it = pending_.begin(); it != pending_.end();) {
          bool done = false;
          try {
            done = (*it)->done.query();
          } catch (const c10::Error&) {
            // The context is gone (a sticky error, or the CUDA runtime unloading at exit):
            // nothing may be freed through it any more; let the process keep what it holds.
            (void)it->release();
            it = pending_.erase(it);
            continue;
          }
          if (done) {
            finished.push_back(std::move(*it));
            it = pending_.erase(it);
          } else {
            ++it;
          }
        }
      }
      // Released outside the lock: a tensor's deleter returns its block to the caching
      // allocator, an event's destructor destroys the CUDA event.
      const bool progress = !finished.empty();
      finished.clear();
      pause = progress
                  ? std::chrono::microseconds(5)
                  : std::min<std::chrono::microseconds>(pause * 2, std::chrono::microseconds(200));
      std::this_thread::sleep_for(pause);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<InFlight>> pending_;
  std::thread thread_;
};

KeepAlive& keepAlive() {
  static KeepAlive* k = new KeepAlive();
  return *k;
}

/// The layout as the tiled kernel takes it, when it does (see hasKernel).
std::optional<Transpose> kernelLayout(const at::Tensor& self) {
  if (!self.is_cuda() || self.is_contiguous() || self.layout() != at::kStrided ||
      self.is_quantized() || self.is_neg() || self.is_conj() || self.requires_grad())
    return std::nullopt;
  const auto item = self.element_size();
  if (item != 1 && item != 2 && item != 4 && item != 8)
    return std::nullopt;
  return asBatchedTranspose(self.sizes().data(), self.strides().data(), self.dim());
}

/// Writes self's values into out (contiguous, same sizes, dtype and device) on the current
/// stream: the tiled kernel for batched 2-D transposes, ATen's copy otherwise.
void convertInto(const at::Tensor& self, at::Tensor& out) {
  if (const auto tr = kernelLayout(self)) {
    C10_CUDA_CHECK(launchTranspose(self.data_ptr(), out.data_ptr(),
                                   static_cast<std::size_t>(self.element_size()), *tr,
                                   c10::cuda::getCurrentCUDAStream(self.device().index())));
  } else {
    out.copy_(self);
  }
}

at::Tensor emptyContiguous(const at::Tensor& like) {
  return at::empty(like.sizes(), like.options().memory_format(at::MemoryFormat::Contiguous));
}

} // namespace

bool hasKernel(const at::Tensor& self) {
  return kernelLayout(self).has_value();
}

c10::intrusive_ptr<c10::ivalue::Future> start(const at::Tensor& self, bool join_now) {
  const c10::Device device = self.device();
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get(),
                                                         std::vector<c10::Device>{device});
  if (self.is_contiguous()) {
    // Valid on the current stream already: no event, no storages to synchronize.
    future->markCompleted(self, std::vector<c10::ivalue::Future::WeakStorage>{});
    return future;
  }
  c10::cuda::CUDAGuard device_guard(device);
  const c10::cuda::CUDAStream producer = c10::cuda::getCurrentCUDAStream(device.index());
  at::Tensor out = emptyContiguous(self); // a block of the producer's stream
  const c10::cuda::CUDAStream side = sideStream(device.index());
  at::cuda::CUDAEvent ready;
  ready.record(producer);
  ready.block(side);
  auto flight = std::make_unique<InFlight>();
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    convertInto(self, out);
    flight->done.record(side);
    // Recorded on the current (side) stream: a waiter's stream waits for the copy.
    future->markCompleted(out);
  }
  if (join_now)
    flight->done.block(producer);
  flight->in = self;
  flight->out = std::move(out);
  keepAlive().add(std::move(flight));
  return future;
}

at::Tensor contiguousFast(const at::Tensor& self) {
  if (!hasKernel(self))
    return self.contiguous();
  c10::cuda::CUDAGuard device_guard(self.device());
  at::Tensor out = emptyContiguous(self);
  convertInto(self, out);
  return out;
}

void contiguousInto(const at::Tensor& self, at::Tensor& out) {
  c10::cuda::CUDAGuard device_guard(self.device());
  convertInto(self, out);
}

std::size_t inFlight() {
  return keepAlive().pending();
}

} // namespace xalloc::runtime::cuda
