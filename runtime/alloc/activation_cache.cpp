// The activation arena of rewritten models (see activation_cache.h for what it promises).
//
// One mapping of reserved address space (MAP_NORESERVE: nothing is backed until written), its
// offsets handed out by memplan's BestFitAllocator under one mutex. Every block carries a
// 64-byte header in front of its data (the arena, its offset and size), so its deleter needs no
// lookup; the data pointer is the DataPtr's context too, so libtorch's raw interface
// (raw_allocate/raw_deallocate) works with the installed allocator, and the arena's range is
// registered with raw_blocks.h's registry, which the raw deleter asks.
//
// Resident free pages are counted from above: a free adds its bytes; a placement takes them off
// only for the part that did not grow the arena. When the count passes the limit, every free
// block's whole pages are given back (MADV_DONTNEED) and the count starts again from 0.
#include "xalloc/runtime/activation_cache.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <new>

#include <pthread.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "xalloc/best_fit.h"
#include "xalloc/torch_compat.h"

#include "raw_blocks.h"
#include "xalloc/runtime/env_count.h"

namespace xalloc::runtime {

struct ActivationCache::Header {
  ActivationCache* owner;
  std::int64_t offset; // of the header, in the arena
  std::int64_t bytes;  // header and data, as placed
};

namespace {

constexpr std::size_t kAlign = 64; // libtorch's own CPU alignment (c10::gAlignment)
constexpr std::size_t kHeader = (sizeof(ActivationCache::Header) + kAlign - 1) / kAlign * kAlign;
constexpr std::size_t kPage = 4096;

ActivationCache::Header* headerOf(void* data) {
  return reinterpret_cast<ActivationCache::Header*>(static_cast<char*>(data) - kHeader);
}

} // namespace

struct ActivationCache::State {
  mutable std::mutex mu;
  BestFitAllocator fit{static_cast<std::int64_t>(kAlign)};
  char* base = nullptr;
  std::size_t reserved = 0;
  std::int64_t idle = 0; // free bytes whose pages may be resident
  ActivationCacheStats stats;
};

namespace {

// Gives the whole pages of every free block back to the OS (their contents read as zeros when
// next written); returns the bytes they span. The caller holds the lock.
std::size_t givePagesBack(ActivationCache::State& s) {
  std::size_t bytes = 0;
#if defined(__linux__)
  s.fit.forEachFreeBlock([&](std::int64_t start, std::int64_t size) {
    const auto lo = (static_cast<std::size_t>(start) + kPage - 1) / kPage * kPage;
    const auto hi = static_cast<std::size_t>(start + size) / kPage * kPage;
    if (hi > lo) {
      ::madvise(s.base + lo, hi - lo, MADV_DONTNEED);
      bytes += hi - lo;
    }
  });
#endif
  s.idle = 0;
  return bytes;
}

std::int64_t clampedBytes(std::size_t v) {
  return static_cast<std::int64_t>(
      std::min<std::size_t>(v, std::numeric_limits<std::int64_t>::max()));
}

} // namespace

ActivationCache::ActivationCache(std::size_t limit_bytes, std::size_t reserve_bytes)
    : state_(new State), limit_(limit_bytes) {
  State& s = *state_;
#if defined(__linux__)
  // As much as the system lends, halving down to 64 MiB (a strict overcommit policy counts a
  // reservation in full).
  for (std::size_t want = reserve_bytes / kPage * kPage; limit_ > 0 && want >= (64u << 20);
       want /= 2) {
    void* p = ::mmap(nullptr, want, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      s.base = static_cast<char*>(p);
      s.reserved = want;
      // No transparent huge pages asked for: with the kernel's defrag mode `madvise`, a fault
      // in an advised range may compact memory first. On a VM it made VGG-11-BN's calls
      // alternate between 101 and 300-600 ms (a steady 108 without the advice), for 2-6% it
      // gained elsewhere (SqueezeNet 1.1 at batch 8: 31.2 -> 29.2 ms).
      break;
    }
  }
#else
  (void)reserve_bytes;
#endif
  if (s.base)
    detail::noteRawRange(s.base, s.reserved, &ActivationCache::deleteBlock);
}

ActivationCache::~ActivationCache() {
#if defined(__linux__)
  if (state_->base) {
    detail::forgetRawRange(state_->base);
    ::munmap(state_->base, state_->reserved);
  }
#endif
  delete state_;
}

c10::DataPtr ActivationCache::allocate(std::size_t bytes) {
  State& s = *state_;
  if (s.base && bytes <= s.reserved) {
    const auto need = static_cast<std::int64_t>((bytes + kHeader + kAlign - 1) / kAlign * kAlign);
    std::unique_lock<std::mutex> lock(s.mu);
    const std::int64_t before = s.fit.workspace();
    const std::int64_t offset = s.fit.alloc(need);
    if (offset + need <= static_cast<std::int64_t>(s.reserved)) {
      const std::int64_t grown = s.fit.workspace() - before;
      s.idle = std::max<std::int64_t>(0, s.idle - (need - grown));
      ++s.stats.hits;
      lock.unlock();
      char* at = s.base + offset;
      new (at) Header{this, offset, need};
      void* data = at + kHeader;
      return {data, data, &ActivationCache::deleteBlock, c10::Device(c10::DeviceType::CPU)};
    }
    s.fit.free(offset, need); // past the reservation
    ++s.stats.misses;
  }
  return c10::GetDefaultCPUAllocator()->allocate(bytes);
}

void ActivationCache::free(Header* h) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  s.fit.free(h->offset, h->bytes);
  s.idle += h->bytes;
  if (s.idle > static_cast<std::int64_t>(limit_)) {
    givePagesBack(s);
    ++s.stats.trims;
  }
  s.stats.peak_idle_bytes = std::max(s.stats.peak_idle_bytes, s.idle);
}

void ActivationCache::deleteBlock(void* data) {
  Header* h = headerOf(data);
  h->owner->free(h);
}

std::size_t ActivationCache::reserved() const {
  return state_->reserved;
}

void ActivationCache::lockForFork() {
  state_->mu.lock();
}

void ActivationCache::unlockAfterFork() {
  state_->mu.unlock();
}

bool ActivationCache::owns(const void* data) const {
  const auto* p = static_cast<const char*>(data);
  return state_->base && p >= state_->base && p < state_->base + state_->reserved;
}

std::size_t ActivationCache::release() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return givePagesBack(*state_);
}

ActivationCacheStats ActivationCache::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  ActivationCacheStats out = state_->stats;
  out.idle_bytes = state_->idle;
  out.live_bytes = state_->fit.used();
  out.workspace_bytes = state_->fit.workspace();
  out.limit_bytes = clampedBytes(limit_);
  out.reserved_bytes = clampedBytes(state_->reserved);
  return out;
}

namespace {

// The process's arena: 64 GiB of address space. Never destroyed: blocks may be freed while
// static destructors run. A bad XALLOC_ACTIVATION_CACHE_MB throws here, and again on the next
// try (a throwing initializer runs again).
constexpr std::size_t kReserve = std::size_t{64} << 30;

ActivationCache* g_process = nullptr; // set once, before any fork handler can run

// fork() in a process whose other threads allocate: the child gets the arena's and the
// registry's locks free and their state whole (a DataLoader worker that frees an inherited
// tensor would otherwise wait forever on a lock held by a thread it does not have).
// (The registry of raw blocks registers its own handlers.)
void beforeFork() {
  if (g_process)
    g_process->lockForFork();
}
void afterFork() {
  if (g_process)
    g_process->unlockAfterFork();
}

ActivationCache& processCache() {
  static ActivationCache* c = [] {
    auto* made = new ActivationCache(
        envCount("XALLOC_ACTIVATION_CACHE_MB", 256, 0, std::size_t{1} << 20, "MiB") << 20,
        kReserve);
    g_process = made;
    ::pthread_atfork(&beforeFork, &afterFork, &afterFork);
    return made;
  }();
  return *c;
}

thread_local bool t_in_scope = false;

class ScopedCacheAllocator final : public c10::Allocator {
public:
  c10::DataPtr allocate(std::size_t bytes) XALLOC_ALLOCATE_CONST override {
    if (t_in_scope && bytes >= kCachedActivationBytes)
      return processCache().allocate(bytes);
    return c10::GetDefaultCPUAllocator()->allocate(bytes);
  }
  XALLOC_ALLOCATOR_COPY_DATA
  // Raw frees go through the registry (raw_blocks.h): a oneDNN weight packed before the install
  // is libtorch's, and is freed through this allocator.
  c10::DeleterFnPtr raw_deleter() const override { return &detail::rawFree; }
};

ScopedCacheAllocator g_allocator;
std::atomic<bool> g_installed{false};
std::mutex g_install_mu;

// Priority 1, as the graceful allocator's install: a later install() takes over (and restores
// this one when it is uninstalled); this one never replaces it.
constexpr std::uint8_t kPriority = 1;

void tryInstall() {
  std::lock_guard<std::mutex> lock(g_install_mu);
  if (g_installed.load(std::memory_order_relaxed))
    return;
  c10::Allocator* now = c10::GetCPUAllocator();
  if (now == &g_allocator) { // put back by the graceful allocator's uninstall
    g_installed.store(true, std::memory_order_release);
    return;
  }
  if (now != c10::GetDefaultCPUAllocator())
    return; // another allocator (the graceful one) keeps every byte; tried again next scope
  c10::SetAllocator(c10::DeviceType::CPU, &g_allocator, kPriority);
  g_installed.store(c10::GetCPUAllocator() == &g_allocator, std::memory_order_release);
}

} // namespace

void enterActivationScope() {
  if (processCache().reserved() == 0)
    return; // turned off (XALLOC_ACTIVATION_CACHE_MB=0), or no address space to reserve
  if (!g_installed.load(std::memory_order_acquire))
    tryInstall();
  t_in_scope = true;
}

void exitActivationScope() {
  t_in_scope = false;
}

bool inActivationScope() {
  return t_in_scope;
}

bool activationCacheInstalled() {
  return c10::GetCPUAllocator() == &g_allocator;
}

bool isActivationCacheAllocator(const c10::Allocator* a) {
  return a == &g_allocator;
}

c10::Allocator* detail::frontAllocator() {
  return &g_allocator;
}

ActivationCacheStats activationCacheStats() {
  return processCache().stats();
}

std::size_t releaseActivationCache() {
  return processCache().release();
}

namespace {

// The two ops a rewritten model runs first and last. CONSERVATIVE: they have effects, so no
// pass removes them or moves ops across them.
const torch::jit::RegisterOperators kScopeOps({
    torch::jit::Operator(
        "xalloc::activations_enter() -> ()", [](torch::jit::Stack&) { enterActivationScope(); },
        c10::AliasAnalysisKind::CONSERVATIVE),
    torch::jit::Operator(
        "xalloc::activations_exit() -> ()", [](torch::jit::Stack&) { exitActivationScope(); },
        c10::AliasAnalysisKind::CONSERVATIVE),
});

} // namespace

} // namespace xalloc::runtime
