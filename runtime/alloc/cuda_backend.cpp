// The CUDA caching allocator as the bottom of a graceful stack (built with XALLOC_WITH_CUDA,
// where libtorch has CUDA). Failure is nullptr; emptyCache() returns the caching allocator's
// cached blocks to the driver; synchronize() waits for the device, after which blocks freed on
// streams that were still running are reusable.
#include <cuda_runtime_api.h>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include "xalloc/runtime/install.h"

namespace xalloc::runtime {

namespace {
class CudaCachingBackend : public Upstream {
public:
  explicit CudaCachingBackend(int device) : device_(device) {}
  void* allocate(std::size_t bytes) override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    try {
      return c10::cuda::CUDACachingAllocator::raw_alloc(bytes);
    } catch (const c10::Error&) { // OutOfMemoryError among them: the ladder takes over
      return nullptr;
    }
  }
  void deallocate(void* p, std::size_t) override { c10::cuda::CUDACachingAllocator::raw_delete(p); }
  std::size_t emptyCache() override {
    std::size_t before = 0, after = 0, total = 0;
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    cudaMemGetInfo(&before, &total);
    c10::cuda::CUDACachingAllocator::emptyCache();
    cudaMemGetInfo(&after, &total);
    return after > before ? after - before : 0;
  }
  void synchronize() override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    cudaDeviceSynchronize();
  }
  std::string name() const override { return "cuda:" + std::to_string(device_); }

private:
  int device_;
};
} // namespace

std::shared_ptr<Upstream> makeCudaCachingBackend(int device) {
  return std::make_shared<CudaCachingBackend>(device);
}

} // namespace xalloc::runtime
