// The activation arena (xalloc/runtime/activation_cache.h): freed blocks reused and merged, the
// bound on resident free pages (asked of the kernel with mincore), what the arena cannot hold,
// threads that free each other's blocks, the scope a rewritten model runs in, and raw frees
// (oneDNN's) that find the right allocator whichever one is installed when they happen.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include <csignal>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

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

// Resident pages of [p, p + bytes), page-aligned inside.
std::size_t residentBytes(const void* p, std::size_t bytes) {
  const auto a = (reinterpret_cast<std::uintptr_t>(p) + 4095) / 4096 * 4096;
  const std::size_t pages = bytes / 4096 - 1;
  std::vector<unsigned char> in(pages);
  EXPECT_EQ(mincore(reinterpret_cast<void*>(a), pages * 4096, in.data()), 0);
  std::size_t n = 0;
  for (unsigned char c : in)
    n += c & 1;
  return n * 4096;
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
  EXPECT_GT(activationCacheStats().reserved_bytes, 0);
  exitActivationScope();
}

TEST(ActivationCache, FreedBlocksAreReusedAndNeighboursMerge) {
  ActivationCache arena(64 * kMiB, 256 * kMiB);
  ASSERT_EQ(arena.reserved(), 256 * kMiB);
  void* first = nullptr;
  {
    c10::DataPtr a = arena.allocate(kMiB);
    c10::DataPtr b = arena.allocate(kMiB);
    first = a.get();
    std::memset(a.get(), 1, kMiB); // the whole block is writable
    std::memset(b.get(), 2, kMiB);
    EXPECT_TRUE(arena.owns(a.get()));
    EXPECT_TRUE(arena.owns(b.get()));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.get()) % 64, 0u);
    EXPECT_GE(static_cast<char*>(b.get()) - static_cast<char*>(a.get()),
              static_cast<std::ptrdiff_t>(kMiB)); // apart
    EXPECT_EQ(arena.stats().live_bytes, arena.stats().workspace_bytes);
  }
  const auto span = arena.stats().workspace_bytes;
  // The two free neighbours merged: one block twice the size fits where they were.
  c10::DataPtr c = arena.allocate(2 * kMiB);
  EXPECT_EQ(c.get(), first);
  EXPECT_EQ(arena.stats().workspace_bytes, span);
  c10::DataPtr d = arena.allocate(3 * kMiB); // no room left: the arena grows
  EXPECT_GT(arena.stats().workspace_bytes, span);
  const auto s = arena.stats();
  EXPECT_EQ(s.hits, 4);
  EXPECT_EQ(s.misses, 0);
  EXPECT_EQ(s.trims, 0);
}

TEST(ActivationCache, FreePagesStayWithinTheLimit) {
  ActivationCache arena(3 * kMiB, 256 * kMiB);
  std::vector<c10::DataPtr> blocks;
  for (int i = 0; i < 6; ++i) {
    blocks.push_back(arena.allocate(kMiB));
    std::memset(blocks.back().get(), 7, kMiB); // backed now
  }
  void* start = blocks.front().get();
  EXPECT_GE(residentBytes(start, 6 * kMiB), 5 * kMiB);
  for (auto& b : blocks) {
    b.clear();
    EXPECT_LE(arena.stats().idle_bytes, static_cast<std::int64_t>(3 * kMiB));
  }
  const auto s = arena.stats();
  EXPECT_GE(s.trims, 1);
  EXPECT_LE(s.peak_idle_bytes, static_cast<std::int64_t>(3 * kMiB));
  // What the kernel says: the free pages went back, past the limit.
  EXPECT_LE(residentBytes(start, 6 * kMiB), 3 * kMiB + 2 * 4096);
  // A block reused after its pages went back reads as written fresh (zeros), and works.
  c10::DataPtr again = arena.allocate(kMiB);
  std::memset(again.get(), 3, kMiB);
  EXPECT_EQ(static_cast<unsigned char*>(again.get())[kMiB - 1], 3);
  again.clear();
  EXPECT_GT(arena.release(), 0u);
  EXPECT_EQ(arena.stats().idle_bytes, 0);
  EXPECT_LE(residentBytes(start, 6 * kMiB), 2 * 4096);
}

TEST(ActivationCache, WhatTheArenaCannotHoldIsLibtorchs) {
  ActivationCache arena(64 * kMiB, 64 * kMiB);
  ASSERT_EQ(arena.reserved(), 64 * kMiB);
  c10::DataPtr big = arena.allocate(40 * kMiB);
  c10::DataPtr more = arena.allocate(40 * kMiB); // past the reservation
  EXPECT_TRUE(arena.owns(big.get()));
  EXPECT_FALSE(arena.owns(more.get()));
  std::memset(more.get(), 1, 40 * kMiB);
  EXPECT_EQ(arena.stats().misses, 1);
  EXPECT_EQ(arena.stats().hits, 1);
  // Turned off (a limit of 0): no arena at all.
  ActivationCache off(0, 64 * kMiB);
  EXPECT_EQ(off.reserved(), 0u);
  c10::DataPtr p = off.allocate(kMiB);
  EXPECT_FALSE(off.owns(p.get()));
}

TEST(ActivationCache, ThreadsAllocateAndFreeEachOthersBlocks) {
  ActivationCache arena(8 * kMiB, 1024 * kMiB);
  constexpr int kThreads = 6;
  constexpr int kRounds = 1500;
  std::mutex mu;
  std::vector<std::tuple<c10::DataPtr, std::size_t, unsigned char>> handed; // freed elsewhere
  std::atomic<int> bad{0};
  std::atomic<std::int64_t> requests{0};
  auto intact = [](const c10::DataPtr& p, std::size_t n, unsigned char v) {
    const auto* b = static_cast<const unsigned char*>(p.get());
    return b[0] == v && b[n / 2] == v && b[n - 1] == v;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < kRounds; ++i) {
        const std::size_t n = (64 << 10) + rng() % (2 * kMiB);
        const auto v = static_cast<unsigned char>(t * 31 + i);
        c10::DataPtr p = arena.allocate(n);
        ++requests;
        std::memset(p.get(), v, n);
        if (!intact(p, n, v))
          ++bad;
        if (rng() % 2) {
          std::lock_guard<std::mutex> lock(mu);
          handed.emplace_back(std::move(p), n, v);
          if (handed.size() > 16) { // another thread's block: still as written, freed here
            auto& [q, qn, qv] = handed.front();
            if (!intact(q, qn, qv))
              ++bad;
            handed.erase(handed.begin());
          }
        }
        if (arena.stats().idle_bytes > static_cast<std::int64_t>(8 * kMiB))
          ++bad;
      }
    });
  for (auto& th : threads)
    th.join();
  handed.clear();
  EXPECT_EQ(bad.load(), 0);
  const auto s = arena.stats();
  EXPECT_EQ(s.hits + s.misses, requests.load());
  EXPECT_EQ(s.misses, 0);
  EXPECT_EQ(s.live_bytes, 0);
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
  EXPECT_EQ(after.hits - before.hits, 2);
  EXPECT_EQ(after.misses, before.misses);
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
  EXPECT_EQ(activationCacheStats().hits, after.hits);
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
  std::int64_t span = 0;
  for (int i = 0; i < 4; ++i) {
    torch::jit::Stack stack{x};
    exec.run(stack);
    EXPECT_TRUE(stack.at(0).toTensor().equal(at::sigmoid(at::relu(x))));
    EXPECT_FALSE(inActivationScope()); // ended with the graph
    if (i == 1)
      span = activationCacheStats().workspace_bytes;
  }
  // Each call's two 256 KiB results are placed in the arena, and once the calls are steady they
  // reuse the same memory: the arena does not grow.
  const auto after = activationCacheStats();
  EXPECT_EQ(after.hits - before.hits, 8);
  EXPECT_EQ(after.workspace_bytes, span);
}

TEST(ActivationCache, AChildForkedWhileThreadsAllocateCanAllocateAndFree) {
  // A DataLoader worker is forked while other threads allocate. Its arena and its registry of
  // raw blocks must not hold a lock taken by a thread the child does not have.
  enterActivationScope();
  exitActivationScope();
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 2; ++t)
    workers.emplace_back([&] {
      enterActivationScope();
      while (!stop) {
        at::Tensor a = at::empty({1 << 18});
        void* r = c10::GetCPUAllocator()->raw_allocate(1 << 17);
        c10::GetCPUAllocator()->raw_deallocate(r);
      }
      exitActivationScope();
    });
  int hung = 0, failed = 0;
  for (int i = 0; i < 40; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(3); // a child that waits on a lock no thread will release
      enterActivationScope();
      {
        at::Tensor a = at::empty({1 << 18});
        std::memset(a.data_ptr(), 1, a.nbytes());
      }
      void* r = c10::GetCPUAllocator()->raw_allocate(1 << 17);
      c10::GetCPUAllocator()->raw_deallocate(r);
      exitActivationScope();
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
      ++hung;
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      ++failed;
  }
  stop = true;
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(hung, 0);
  EXPECT_EQ(failed, 0);
}
