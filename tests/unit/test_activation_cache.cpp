// The activation cache (xalloc/runtime/activation_cache.h): blocks reused by size class, the
// bound on idle bytes with the oldest given back first, threads that free each other's blocks,
// the scope a rewritten model runs in, and raw frees (oneDNN's) that find the right allocator
// whichever one is installed when they happen.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include "xalloc/runtime/activation_cache.h"
#include "xalloc/runtime/async.h"
#include "xalloc/runtime/install.h"
#include "xalloc/tspass/rewrite.h"

using namespace xalloc::runtime;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

c10::Allocator* libtorch() {
  return c10::GetDefaultCPUAllocator();
}

} // namespace

// First in the suite: the process's cache is made on the first scope, from the variable.
TEST(ActivationCache, ABadLimitIsOneLineAndNothingIsInstalled) {
  ASSERT_EQ(setenv("XALLOC_ACTIVATION_CACHE_MB", "lots", 1), 0);
  try {
    enterActivationScope();
    ADD_FAILURE() << "a bad XALLOC_ACTIVATION_CACHE_MB was taken";
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    EXPECT_NE(what.find("XALLOC_ACTIVATION_CACHE_MB"), std::string::npos) << what;
    EXPECT_NE(what.find("lots"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_FALSE(inActivationScope());
  EXPECT_FALSE(activationCacheInstalled());
  ASSERT_EQ(unsetenv("XALLOC_ACTIVATION_CACHE_MB"), 0);
  enterActivationScope(); // the default, 256 MiB
  EXPECT_TRUE(inActivationScope());
  EXPECT_TRUE(activationCacheInstalled());
  EXPECT_EQ(activationCacheStats().limit_bytes, static_cast<std::int64_t>(256 * kMiB));
  exitActivationScope();
}

TEST(ActivationCache, SizeClassesHoldTheRequestWithinAnEighth) {
  std::size_t last = 0;
  for (std::size_t n = 1; n < 64 * kMiB; n = n * 5 / 4 + 3) {
    const std::size_t c = ActivationCache::sizeClass(n);
    EXPECT_GE(c, n);
    // Pages below 32 KiB; from there (every request the cache takes) at most an eighth more.
    EXPECT_LE(c, n < (32 << 10) ? (n + 4095) / 4096 * 4096 : n + n / 8) << n;
    EXPECT_EQ(c % 4096, 0u) << n;
    EXPECT_GE(c, last) << n; // monotone
    last = c;
  }
  EXPECT_THROW(ActivationCache::sizeClass(~std::size_t{0}), c10::Error);
}

TEST(ActivationCache, AFreedBlockServesTheNextRequestOfItsClass) {
  ActivationCache cache(64 * kMiB, libtorch());
  void* first = nullptr;
  {
    c10::DataPtr a = cache.allocate(kMiB);
    first = a.get();
    std::memset(first, 1, kMiB); // the whole block is writable
    EXPECT_TRUE(cache.owns(first));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % 64, 0u);
  }
  EXPECT_EQ(cache.stats().idle_bytes, static_cast<std::int64_t>(kMiB));
  c10::DataPtr b = cache.allocate(kMiB - 1000); // the same class
  EXPECT_EQ(b.get(), first);
  c10::DataPtr c = cache.allocate(3 * kMiB); // another class: a new block
  EXPECT_NE(c.get(), first);
  const auto s = cache.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 2);
  EXPECT_EQ(s.idle_bytes, 0);
}

TEST(ActivationCache, IdleBytesStayWithinTheLimitAndTheOldestGoFirst) {
  ActivationCache cache(3 * kMiB, libtorch());
  std::vector<c10::DataPtr> blocks;
  std::vector<void*> where;
  for (int i = 0; i < 4; ++i) {
    blocks.push_back(cache.allocate(kMiB));
    where.push_back(blocks.back().get());
  }
  for (auto& b : blocks) {
    b.clear(); // freed in order: 0 is the oldest idle block
    EXPECT_LE(cache.stats().idle_bytes, static_cast<std::int64_t>(3 * kMiB));
  }
  auto s = cache.stats();
  EXPECT_EQ(s.evictions, 1);
  EXPECT_EQ(s.idle_bytes, static_cast<std::int64_t>(3 * kMiB));
  EXPECT_EQ(s.peak_idle_bytes, static_cast<std::int64_t>(3 * kMiB));
  EXPECT_FALSE(cache.owns(where[0])); // given back
  // The most recently freed block is reused first.
  c10::DataPtr again = cache.allocate(kMiB);
  EXPECT_EQ(again.get(), where[3]);
  // A block larger than the whole limit is given back when freed.
  {
    c10::DataPtr huge = cache.allocate(5 * kMiB);
    EXPECT_TRUE(cache.owns(huge.get()));
  }
  EXPECT_EQ(cache.stats().idle_bytes, static_cast<std::int64_t>(2 * kMiB));
  EXPECT_EQ(cache.release(), 2 * kMiB);
  EXPECT_EQ(cache.stats().idle_bytes, 0);
}

TEST(ActivationCache, ThreadsAllocateAndFreeEachOthersBlocks) {
  ActivationCache cache(8 * kMiB, libtorch());
  constexpr int kThreads = 6;
  constexpr int kRounds = 1500;
  std::mutex mu;
  std::vector<std::pair<c10::DataPtr, unsigned char>> handed; // freed by another thread
  std::atomic<int> bad{0};
  std::atomic<std::int64_t> requests{0};
  auto check = [&](const c10::DataPtr& p, std::size_t n, unsigned char v) {
    const auto* b = static_cast<const unsigned char*>(p.get());
    if (b[0] != v || b[n / 2] != v || b[n - 1] != v)
      ++bad;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < kRounds; ++i) {
        const std::size_t n = (64 << 10) + rng() % (2 * kMiB);
        const auto v = static_cast<unsigned char>(t * 31 + i);
        c10::DataPtr p = cache.allocate(n);
        ++requests;
        std::memset(p.get(), v, n);
        check(p, n, v);
        if (rng() % 2) {
          std::lock_guard<std::mutex> lock(mu);
          handed.emplace_back(std::move(p), v);
          if (handed.size() > 16) { // another thread's block, checked and freed here
            check(handed.front().first, 64 << 10, handed.front().second);
            handed.erase(handed.begin());
          }
        }
        if (cache.stats().idle_bytes > static_cast<std::int64_t>(8 * kMiB))
          ++bad;
      }
    });
  for (auto& th : threads)
    th.join();
  handed.clear();
  EXPECT_EQ(bad.load(), 0);
  const auto s = cache.stats();
  EXPECT_EQ(s.hits + s.misses, requests.load());
  EXPECT_GT(s.hits, 0);
  EXPECT_LE(s.peak_idle_bytes, static_cast<std::int64_t>(8 * kMiB));
}

TEST(ActivationCache, OnlyLargeTensorsInsideTheScopeComeFromTheCache) {
  enterActivationScope();
  ASSERT_TRUE(activationCacheInstalled());
  const auto before = activationCacheStats();
  void* first = nullptr;
  {
    at::Tensor t = at::empty({static_cast<std::int64_t>(kMiB / 4)}); // 1 MiB of floats
    first = t.data_ptr();
    at::Tensor small = at::empty({16}); // below kCachedActivationBytes: libtorch's
  }
  at::Tensor again = at::empty({static_cast<std::int64_t>(kMiB / 4)});
  EXPECT_EQ(again.data_ptr(), first);
  auto after = activationCacheStats();
  EXPECT_EQ(after.hits - before.hits, 1);
  EXPECT_EQ(after.misses - before.misses, 1);
  exitActivationScope();
  EXPECT_FALSE(inActivationScope());
  // Outside the scope every request is libtorch's, and the cache's block is still valid.
  at::Tensor outside = at::ones({static_cast<std::int64_t>(kMiB / 4)});
  again.fill_(2);
  EXPECT_EQ(activationCacheStats().hits, after.hits);
  EXPECT_EQ(activationCacheStats().misses, after.misses);
  EXPECT_EQ(again.sum().item<double>(), 2.0 * static_cast<double>(kMiB / 4));
  // Another thread is outside the scope even while this one is inside.
  enterActivationScope();
  std::thread([&] {
    EXPECT_FALSE(inActivationScope());
    at::Tensor t = at::empty({static_cast<std::int64_t>(kMiB / 4)});
  }).join();
  EXPECT_EQ(activationCacheStats().misses, after.misses);
  exitActivationScope();
}

TEST(ActivationCache, OneDnnTensorsAreFreedByTheirOwnAllocator) {
  // libtorch frees a oneDNN tensor through the allocator installed at the time of the free.
  // Each case crashed (a header read in front of libtorch's block, or free() of a block with a
  // header) before the raw frees went through the registry.
  const at::Tensor x = at::rand({300, 300});
  const double want = x.sum().item<double>();
  at::Tensor before = x.to_mkldnn(); // libtorch's block
  at::Tensor in_scope;
  {
    enterActivationScope();
    in_scope = x.to_mkldnn(); // the cache's block (ideep's raw_allocate)
    before.reset();           // freed through the cache's allocator
    exitActivationScope();
  }
  EXPECT_DOUBLE_EQ(in_scope.to_dense().sum().item<double>(), want);
  at::Tensor graceful;
  {
    Guard g(InstallOptions{});
    in_scope.reset(); // the cache's block, freed through the graceful allocator
    graceful = x.to_mkldnn();
    at::Tensor plain = x.to_mkldnn();
  }
  EXPECT_DOUBLE_EQ(graceful.to_dense().sum().item<double>(), want);
  graceful.reset(); // the graceful allocator's block, freed after its uninstall
  SUCCEED();
}

TEST(ActivationCache, TheGracefulAllocatorKeepsEveryByteWhileInstalled) {
  Guard g(InstallOptions{});
  const auto before = activationCacheStats();
  const auto counted = stats().at("allocation.all.allocated");
  enterActivationScope();
  at::Tensor t = at::empty({static_cast<std::int64_t>(kMiB)});
  exitActivationScope();
  EXPECT_EQ(activationCacheStats().misses, before.misses);
  EXPECT_EQ(activationCacheStats().hits, before.hits);
  EXPECT_GT(stats().at("allocation.all.allocated"), counted);
}

TEST(ActivationCache, ARewrittenGraphRunsInsideTheScope) {
  ASSERT_GT(loadOps(), 0);
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%x : Tensor):
  %y : Tensor = aten::relu(%x)
  %z : Tensor = aten::sigmoid(%y)
  return (%z))IR",
                      graph.get());
  ASSERT_TRUE(xalloc::tspass::scopeActivations(*graph));
  EXPECT_FALSE(xalloc::tspass::scopeActivations(*graph)); // once
  EXPECT_EQ(graph->nodes().front()->kind().toQualString(),
            std::string("xalloc::activations_enter"));
  EXPECT_EQ(graph->return_node()->prev()->kind().toQualString(),
            std::string("xalloc::activations_exit"));
  torch::jit::GraphExecutor exec(graph, "scoped");
  const at::Tensor x = at::randn({4, 256, 64});
  const auto before = activationCacheStats();
  for (int i = 0; i < 3; ++i) {
    torch::jit::Stack stack{x};
    exec.run(stack);
    EXPECT_TRUE(stack.at(0).toTensor().equal(at::sigmoid(at::relu(x))));
    EXPECT_FALSE(inActivationScope()); // ended with the graph
  }
  const auto after = activationCacheStats();
  EXPECT_GE(after.hits - before.hits, 3); // the calls after the first reuse its blocks
}
