// The activation cache of rewritten models (see activation_cache.h for what it promises).
//
// Every block carries a header in front of its data: the cache that keeps it, its size class,
// the upstream allocation it lives in, and its links in the list of idle blocks, oldest first.
// The data pointer is the DataPtr's context too, so libtorch's raw interface
// (raw_allocate/raw_deallocate) works with the installed allocator; each block is registered
// with raw_blocks.h's registry, which the raw deleter asks.
//
// Idle blocks wait in a bucket per size class, the most recently freed on top (its pages are
// the likeliest in cache), and in one list by age: when keeping a freed block would take the
// idle bytes past the limit, the oldest idle blocks are given back first, so a model that is
// served at a new shape keeps the new shape's blocks rather than the old ones.
#include "xalloc/runtime/activation_cache.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "xalloc/torch_compat.h"

#include "env_count.h"
#include "raw_blocks.h"

namespace xalloc::runtime {

struct ActivationCache::Header {
  ActivationCache* owner;
  std::size_t cls;
  c10::DataPtr upstream;
  Header* older = nullptr; // the idle list, while idle
  Header* newer = nullptr;
};

namespace {

constexpr std::size_t kAlign = 64; // libtorch's own CPU alignment (c10::gAlignment)
constexpr std::size_t kHeader = (sizeof(ActivationCache::Header) + kAlign - 1) / kAlign * kAlign;
constexpr std::size_t kPage = 4096;

ActivationCache::Header* headerOf(void* data) {
  return reinterpret_cast<ActivationCache::Header*>(static_cast<char*>(data) - kHeader);
}

void destroy(ActivationCache::Header* h) {
  detail::forgetRawBlock(reinterpret_cast<char*>(h) + kHeader);
  c10::DataPtr up = std::move(h->upstream); // frees the block as it goes
  h->~Header();
}

} // namespace

struct ActivationCache::State {
  mutable std::mutex mu;
  std::unordered_map<std::size_t, std::vector<Header*>> idle; // by size class, newest last
  Header* oldest = nullptr;
  Header* newest = nullptr;
  ActivationCacheStats stats;
};

ActivationCache::ActivationCache(std::size_t limit_bytes, c10::Allocator* upstream)
    : state_(new State), limit_(limit_bytes), upstream_(upstream) {
  TORCH_CHECK(upstream_ != nullptr, "xalloc: an activation cache needs an upstream allocator");
  state_->stats.limit_bytes = static_cast<std::int64_t>(
      std::min<std::size_t>(limit_, std::numeric_limits<std::int64_t>::max()));
}

ActivationCache::~ActivationCache() {
  release();
  delete state_;
}

std::size_t ActivationCache::sizeClass(std::size_t bytes) {
  TORCH_CHECK(bytes <= (std::numeric_limits<std::size_t>::max() >> 2), "xalloc: cannot allocate ",
              bytes, " bytes");
  if (bytes <= kPage)
    return kPage;
  std::size_t top = 1;
  while (top <= bytes / 2)
    top <<= 1; // the largest power of two <= bytes
  const std::size_t step = std::max(kPage, top / 8);
  return (bytes + step - 1) / step * step;
}

c10::DataPtr ActivationCache::allocate(std::size_t bytes) {
  const std::size_t cls = sizeClass(bytes);
  if (Header* h = take(cls)) {
    void* data = reinterpret_cast<char*>(h) + kHeader;
    return {data, data, &ActivationCache::deleteBlock, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DataPtr up = upstream_->allocate(cls + kHeader);
  TORCH_CHECK(up.get() != nullptr, "xalloc: out of memory allocating ", bytes, " bytes");
  void* base = up.get();
  new (base) Header{this, cls, std::move(up)};
  void* data = static_cast<char*>(base) + kHeader;
  detail::noteRawBlock(data, &ActivationCache::deleteBlock);
  return {data, data, &ActivationCache::deleteBlock, c10::Device(c10::DeviceType::CPU)};
}

bool ActivationCache::owns(const void* data) const {
  return detail::rawBlockDeleter(data) == &ActivationCache::deleteBlock &&
         headerOf(const_cast<void*>(data))->owner == this;
}

ActivationCache::Header* ActivationCache::take(std::size_t cls) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.idle.find(cls);
  if (it == s.idle.end() || it->second.empty()) {
    ++s.stats.misses;
    return nullptr;
  }
  Header* h = it->second.back();
  it->second.pop_back();
  (h->older ? h->older->newer : s.oldest) = h->newer;
  (h->newer ? h->newer->older : s.newest) = h->older;
  h->older = h->newer = nullptr;
  s.stats.idle_bytes -= static_cast<std::int64_t>(cls);
  ++s.stats.hits;
  return h;
}

void ActivationCache::recycle(Header* h) {
  std::vector<Header*> gone;
  {
    State& s = *state_;
    std::lock_guard<std::mutex> lock(s.mu);
    if (h->cls > limit_) {
      gone.push_back(h);
    } else {
      while (static_cast<std::size_t>(s.stats.idle_bytes) + h->cls > limit_) {
        Header* old = s.oldest; // not null: the idle bytes are above 0
        s.oldest = old->newer;
        (s.oldest ? s.oldest->older : s.newest) = nullptr;
        auto& bucket = s.idle[old->cls];
        *std::find(bucket.begin(), bucket.end(), old) = bucket.back();
        bucket.pop_back();
        s.stats.idle_bytes -= static_cast<std::int64_t>(old->cls);
        ++s.stats.evictions;
        gone.push_back(old);
      }
      h->older = s.newest;
      h->newer = nullptr;
      (s.newest ? s.newest->newer : s.oldest) = h;
      s.newest = h;
      s.idle[h->cls].push_back(h);
      s.stats.idle_bytes += static_cast<std::int64_t>(h->cls);
      s.stats.peak_idle_bytes = std::max(s.stats.peak_idle_bytes, s.stats.idle_bytes);
    }
  }
  for (Header* g : gone) // given back outside the lock
    destroy(g);
}

void ActivationCache::deleteBlock(void* data) {
  Header* h = headerOf(data);
  h->owner->recycle(h);
}

std::size_t ActivationCache::release() {
  std::vector<Header*> gone;
  std::size_t bytes = 0;
  {
    State& s = *state_;
    std::lock_guard<std::mutex> lock(s.mu);
    for (Header* h = s.oldest; h; h = h->newer) {
      gone.push_back(h);
      bytes += h->cls;
    }
    s.idle.clear();
    s.oldest = s.newest = nullptr;
    s.stats.idle_bytes = 0;
  }
  for (Header* g : gone)
    destroy(g);
  return bytes;
}

ActivationCacheStats ActivationCache::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

namespace {

// The process's cache, over libtorch's own allocator. Never destroyed: blocks may be freed while
// static destructors run. A bad XALLOC_ACTIVATION_CACHE_MB throws here, and again on the next
// try (a throwing initializer runs again).
ActivationCache& processCache() {
  static ActivationCache* c = new ActivationCache(
      envCount("XALLOC_ACTIVATION_CACHE_MB", 256, 0, std::size_t{1} << 20, "MiB") << 20,
      c10::GetDefaultCPUAllocator());
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
  if (processCache().limit() == 0)
    return;
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
