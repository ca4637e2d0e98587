// The graceful allocator installed as libtorch's CPU allocator: real tensors, a byte cap, the
// retry ladder, and uninstall with tensors still alive.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "xalloc/runtime/install.h"

#include "allocator_suite.h"

using namespace xalloc::runtime;
using namespace xalloc::runtime::testing_suite;

// libtorch's CPU backend passes the suite every stack passes: alone and under the full stack.
INSTANTIATE_TEST_SUITE_P(
    CpuBackend, EveryStack,
    testing::Values(
        StackCase{"cpu",
                  [](std::size_t cap) { return makeCpuBackend(static_cast<std::int64_t>(cap)); },
                  false},
        StackCase{"full_over_cpu",
                  [](std::size_t cap) {
                    RetryConfig c;
                    c.deadline_ms = 100;
                    return makeStack(makeCpuBackend(static_cast<std::int64_t>(cap)), c).top;
                  },
                  true}),
    caseName);

namespace {
InstallOptions capped(std::int64_t bytes) {
  InstallOptions o;
  o.limit_bytes = bytes;
  o.retry.deadline_ms = 200;
  o.retry.backoff_ms = 1;
  o.retry.backoff_max_ms = 10;
  return o;
}
} // namespace

TEST(GracefulCpu, CountsTensorsAndRespectsTheCap) {
  Guard g(capped(64 << 20));
  ASSERT_TRUE(installed());
  resetStats();
  const auto before = stats();
  at::Tensor a = at::ones({1 << 20}); // 4 MiB
  at::Tensor b = a * 2 + 1;
  EXPECT_EQ(b.sum().item<double>(), 3.0 * (1 << 20));
  auto m = stats();
  EXPECT_GE(m["allocation.all.allocated"] - before.at("allocation.all.allocated"), 2);
  EXPECT_GE(m["allocated_bytes.all.current"], 2.0 * (4 << 20));
  EXPECT_GE(m["largest_request_bytes"], 4 << 20);
  try {
    at::Tensor huge = at::empty({100 << 20}); // 400 MiB over a 64 MiB cap
    FAIL() << "allocated past the cap";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("xalloc: out of memory: cannot allocate 400.0 MiB"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(stats()["num_ooms"], 1);
}

TEST(GracefulCpu, ReleaseCallbackMakesRoom) {
  Guard g(capped(64 << 20));
  std::optional<at::Tensor> cache = at::empty({10 << 20}); // 40 MiB held by "a cache"
  const int id = addReleaseCallback([&](std::size_t) {
    const std::size_t freed = cache ? cache->nbytes() : 0;
    cache.reset();
    return freed;
  });
  ASSERT_GE(id, 0);
  at::Tensor t = at::zeros({10 << 20}); // does not fit next to the cache
  EXPECT_FALSE(cache.has_value());
  EXPECT_EQ(stats()["recovered.callbacks"], 1);
  EXPECT_EQ(t.sum().item<double>(), 0.0);
  removeReleaseCallback(id);
}

TEST(GracefulCpu, UninstallKeepsLiveTensorsValid) {
  std::optional<at::Tensor> kept;
  {
    Guard g(capped(0));
    kept = at::arange(1000, at::kFloat);
  }
  EXPECT_FALSE(installed());
  const double current = stats()["allocated_bytes.all.current"];
  EXPECT_GE(current, 4000);
  at::Tensor other = at::ones({1000}); // the default allocator again: not counted
  EXPECT_EQ(stats()["allocated_bytes.all.current"], current);
  EXPECT_EQ(kept->sum().item<double>(), 999.0 * 1000 / 2);
  kept.reset(); // freed through the stack that allocated it
  EXPECT_LT(stats()["allocated_bytes.all.current"], current);
}

TEST(GracefulCpu, BadEnvironmentIsNamed) {
  ::setenv("XALLOC_CPU_LIMIT", "lots", 1);
  try {
    InstallOptions::fromEnvironment();
    FAIL() << "accepted XALLOC_CPU_LIMIT=lots";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("XALLOC_CPU_LIMIT='lots'"), std::string::npos);
  }
  ::setenv("XALLOC_CPU_LIMIT", "512M", 1);
  EXPECT_EQ(InstallOptions::fromEnvironment().limit_bytes, 512 << 20);
  // The grammar of every other byte size (xalloc/bytes.h): these were refused here once.
  ::setenv("XALLOC_CPU_LIMIT", "2GB", 1);
  EXPECT_EQ(InstallOptions::fromEnvironment().limit_bytes, 2ll << 30);
  ::setenv("XALLOC_CPU_LIMIT", "8g", 1);
  EXPECT_EQ(InstallOptions::fromEnvironment().limit_bytes, 8ll << 30);
  // A cap of 0 refuses everything: an error, not "no cap" without a word.
  for (const char* bad : {"inf", "1e30G", "-1", "0", "0.4"}) {
    ::setenv("XALLOC_CPU_LIMIT", bad, 1);
    EXPECT_THROW(InstallOptions::fromEnvironment(), std::invalid_argument) << bad;
  }
  ::unsetenv("XALLOC_CPU_LIMIT");
}

// Installs nest as a stack: leaving the inner one puts the outer one (its cap) back, rather than
// leaving the rest of the outer block uncapped.
TEST(GracefulCpu, InstallsNestAsAStack) {
  Guard outer(capped(32 << 20));
  {
    Guard inner(capped(256 << 20));
    at::Tensor big = at::empty({40 << 20}); // 160 MiB: within the inner cap
    EXPECT_TRUE(installed());
  }
  EXPECT_TRUE(installed()) << "leaving the inner block uninstalled the outer one";
  EXPECT_THROW(at::empty({40 << 20}), c10::OutOfMemoryError) << "the outer cap is gone";
}

// A release callback added before install is called by what is installed after; one that
// allocates (and fails) does not send the ladder round again, and the deadline holds.
TEST(GracefulCpu, CallbacksOutliveInstallsAndMayNotReenter) {
  std::optional<at::Tensor> cache;
  int calls = 0;
  const int id = addReleaseCallback([&](std::size_t) {
    ++calls;
    const std::size_t freed = cache ? cache->nbytes() : 0;
    cache.reset();
    return freed;
  });
  {
    Guard g(capped(64 << 20));
    cache = at::empty({10 << 20});
    at::Tensor t = at::zeros({10 << 20}); // fits once the callback frees the cache
    EXPECT_EQ(calls, 1) << "a callback added before install was never called";
    EXPECT_FALSE(cache.has_value());
  }
  removeReleaseCallback(id);
  int reentered = 0;
  const int greedy = addReleaseCallback([&](std::size_t) -> std::size_t {
    ++reentered;
    at::Tensor more = at::empty({30 << 20}); // allocates inside the ladder, and cannot
    return more.nbytes();
  });
  {
    InstallOptions o = capped(64 << 20);
    o.retry.deadline_ms = 300;
    Guard g(o);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_THROW(at::empty({30 << 20}), c10::OutOfMemoryError);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(reentered, 1) << "the callback was called again from inside itself";
    EXPECT_LT(ms, 3000) << "ran far past a 300 ms deadline"; // generous: a loaded machine
  }
  removeReleaseCallback(greedy);
}

// reset_stats() with tensors alive: counts stay non-negative when they are freed.
TEST(GracefulCpu, ResetWithLiveTensorsKeepsCountsNonNegative) {
  Guard g(capped(64 << 20));
  std::optional<at::Tensor> live = at::empty({1 << 20});
  resetStats();
  live.reset();
  const auto m = stats();
  EXPECT_GE(m.at("allocation.all.current"), 0);
  EXPECT_GE(m.at("allocated_bytes.all.current"), 0);
}
