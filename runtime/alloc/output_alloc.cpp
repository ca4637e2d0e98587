// Output buffers of the runtime's conversions. A conversion writes every byte of a fresh tensor;
// with 4 KiB pages most of its time on large tensors is the kernel's page faults (a 64 MiB
// output is 16384 faults, each zeroing a page), not the copy. Large outputs are therefore
// mapped on their own with transparent huge pages asked for (madvise): 32 faults for 64 MiB.
// Freed mappings are kept in a small cache (XALLOC_OUTPUT_CACHE_MB, default 256 MiB) for the
// next output of the same size: a model converts the same shapes every step, and a reused
// mapping costs neither faults nor zeroing. Smaller outputs come from libtorch's allocator (or
// the activation cache in front of it, inside a rewritten model: activation_cache.h); while
// another CPU allocator is installed (the graceful allocator with its budget and ledger), it
// allocates every output.
#include "xalloc/runtime/output_alloc.h"

#include "xalloc/runtime/activation_cache.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include <ATen/EmptyTensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "xalloc/torch_compat.h"

#include "xalloc/runtime/env_count.h"

namespace xalloc::runtime {

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

#if defined(__linux__) && defined(MADV_HUGEPAGE)
struct Mapping {
  void* base;
  std::size_t length;
};

std::atomic<std::int64_t> g_mapped{0};

std::size_t cacheLimit() {
  // 0 turns the cache off; at most 1 TiB.
  return envCount("XALLOC_OUTPUT_CACHE_MB", 256, 0, std::size_t{1} << 20, "MiB") << 20;
}

// Freed mappings waiting for an output of their size. Never destroyed (outputs may be freed
// while static destructors run).
struct Cache {
  std::mutex mu;
  std::vector<Mapping> free;
  std::size_t bytes = 0;
  const std::size_t limit = cacheLimit();
};
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

void unmap(void* ctx) {
  auto* m = static_cast<Mapping*>(ctx);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.bytes + m->length <= c.limit) {
      c.free.push_back(*m);
      c.bytes += m->length;
      delete m;
      return;
    }
  }
  ::munmap(m->base, m->length);
  delete m;
}

c10::DataPtr mapHuge(std::size_t bytes) {
  const std::size_t body = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    for (std::size_t i = 0; i < c.free.size(); ++i)
      if (c.free[i].length == body) {
        const Mapping m = c.free[i];
        c.free[i] = c.free.back();
        c.free.pop_back();
        c.bytes -= m.length;
        return {m.base, new Mapping{m}, &unmap, c10::Device(c10::DeviceType::CPU)};
      }
  }
  const std::size_t length = body + kHugePage;
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED && releaseOutputCache() > 0)
    base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    return {}; // libtorch's allocator gets its turn (and reports the failure)
  const auto addr = reinterpret_cast<std::uintptr_t>(base);
  const std::uintptr_t aligned = (addr + kHugePage - 1) & ~(kHugePage - 1);
  // Give back the unaligned head and the unused tail at once.
  const std::size_t head = aligned - addr;
  if (head > 0)
    ::munmap(base, head);
  if (length - head - body > 0)
    ::munmap(reinterpret_cast<void*>(aligned + body), length - head - body);
  void* data = reinterpret_cast<void*>(aligned);
  ::madvise(data, body, MADV_HUGEPAGE); // advice: without THP it is ignored or fails, harmlessly
  g_mapped.fetch_add(1, std::memory_order_relaxed);
  return {data, new Mapping{data, body}, &unmap, c10::Device(c10::DeviceType::CPU)};
}
#endif

class OutputAllocator final : public c10::Allocator {
public:
  c10::DataPtr allocate(std::size_t bytes) XALLOC_ALLOCATE_CONST override {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes >= kHugePageOutputBytes) {
      c10::DataPtr p = mapHuge(bytes);
      if (p)
        return p;
    }
#endif
    // libtorch's allocator, or the activation cache in front of it (activation_cache.h).
    return c10::GetCPUAllocator()->allocate(bytes);
  }
  XALLOC_ALLOCATOR_COPY_DATA
  c10::DeleterFnPtr raw_deleter() const override {
    return nullptr;
  }
};

OutputAllocator g_output_allocator;

} // namespace

at::Tensor emptyOutput(const at::Tensor& like) {
  // Only when libtorch's own allocator is in place: an installed one (the graceful allocator)
  // keeps its budget, ledger and statistics for every byte.
  c10::Allocator* now = c10::GetCPUAllocator();
  c10::Allocator* alloc = now == c10::GetDefaultCPUAllocator() || isActivationCacheAllocator(now)
                              ? static_cast<c10::Allocator*>(&g_output_allocator)
                              : now;
  return at::detail::empty_generic(like.sizes(), alloc, c10::DispatchKeySet(c10::DispatchKey::CPU),
                                   like.scalar_type(), c10::MemoryFormat::Contiguous);
}

std::size_t releaseOutputCache() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  std::vector<Mapping> free;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    free.swap(c.free);
    c.bytes = 0;
  }
  std::size_t bytes = 0;
  for (const Mapping& m : free) {
    ::munmap(m.base, m.length);
    bytes += m.length;
  }
  return bytes;
#else
  return 0;
#endif
}

std::int64_t hugePageOutputs() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  return g_mapped.load(std::memory_order_relaxed);
#else
  return 0;
#endif
}

} // namespace xalloc::runtime
