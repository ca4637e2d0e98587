// The graceful allocator without libtorch: one suite every stack passes, fake upstreams for each
// rung of the retry ladder, randomized multi-threaded counting, the log, the configuration, and
// two real processes sharing a simulated device through the ledger.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xalloc/runtime/allocator.h"
#include "xalloc/runtime/ledger.h"

#include "allocator_suite.h"

extern char** environ;

using namespace xalloc::runtime;
using namespace xalloc::runtime::testing_suite;

namespace {

// Waits that only a wake-up can end before a test's timeout.
constexpr double kHourMs = 3600.0 * 1000;

RetryConfig quick() {
  RetryConfig c;
  c.deadline_ms = 300;
  c.backoff_ms = 0.5;
  c.backoff_max_ms = 5;
  return c;
}

std::string uniqueLedger(const char* what) {
  return "/xalloc-test-" + std::string(what) + "-" + std::to_string(::getpid());
}

// ---- one suite, every stack (tests/unit/allocator_suite.h) -----------------------------------

INSTANTIATE_TEST_SUITE_P(
    Allocator, EveryStack,
    testing::Values(
        StackCase{"simulated",
                  [](std::size_t cap) { return std::make_shared<SimulatedDevice>(cap); }, false},
        StackCase{"stats",
                  [](std::size_t cap) {
                    return std::make_shared<StatsStage>(std::make_shared<SimulatedDevice>(cap),
                                                        std::make_shared<Stats>());
                  },
                  false},
        StackCase{"full",
                  [](std::size_t cap) {
                    return makeStack(std::make_shared<SimulatedDevice>(cap), quick()).top;
                  },
                  true},
        StackCase{"full+log",
                  [](std::size_t cap) {
                    return makeStack(std::make_shared<SimulatedDevice>(cap), quick(), nullptr, true,
                                     "/dev/null")
                        .top;
                  },
                  true},
        StackCase{
            "full+ledger",
            [](std::size_t cap) {
              const std::string name = uniqueLedger("suite");
              Ledger::unlink(name);
              auto ledger = Ledger::open(name, static_cast<std::int64_t>(cap));
              Ledger::unlink(name); // this process keeps its mapping
              return makeStack(std::make_shared<SimulatedDevice>(cap, ledger), quick(), ledger).top;
            },
            true}),
    caseName);

// ---- fake upstreams ----------------------------------------------------------------------------

class FailN : public Upstream {
public:
  explicit FailN(int n) : left_(n) {}
  void* allocate(std::size_t b) override {
    if (left_.fetch_sub(1) > 0)
      return nullptr;
    return std::malloc(std::max<std::size_t>(b, 1));
  }
  void deallocate(void* p, std::size_t) override { std::free(p); }
  std::string name() const override { return "fail-n"; }

private:
  std::atomic<int> left_;
};

TEST(Allocator, AlwaysFailingUpstreamThrowsWithTheStats) {
  RetryConfig c = quick();
  c.max_attempts = 1000; // the deadline ends it
  auto stack = makeStack(std::make_shared<FailN>(1 << 30), c);
  try {
    stack.top->allocate(4096);
    FAIL() << "no OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.requestedBytes(), 4096u);
    EXPECT_NE(std::string(e.what()).find("out of memory: cannot allocate 4.0 KiB on fail-n"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("retries"), std::string::npos) << e.what();
  }
  auto m = stack.stats->snapshot();
  EXPECT_EQ(m["num_ooms"], 1);
  EXPECT_GT(m["num_alloc_retries"], 3);
  // The deadline ended it, not the attempt cap (two tries per attempt at most).
  EXPECT_LT(m["num_alloc_retries"], 2 * c.max_attempts);
  EXPECT_EQ(m["allocation.all.allocated"], 0);
  // How close to the deadline it gives up is measured by xbench-alloc, not asserted here.
}

TEST(Allocator, AttemptCapStopsBeforeTheDeadline) {
  RetryConfig c = quick();
  c.deadline_ms = 10000;
  c.max_attempts = 3;
  auto stack = makeStack(std::make_shared<FailN>(1 << 30), c);
  EXPECT_THROW(stack.top->allocate(1), OutOfMemory);
  // search, synchronize, and two tries for each of the 3 attempts: the cap, not the deadline.
  EXPECT_EQ(stack.stats->snapshot()["num_alloc_retries"], 2 + 2 * c.max_attempts);
}

TEST(Allocator, EachRungRecovers) {
  { // a transient failure: searching again succeeds
    auto stack = makeStack(std::make_shared<FailN>(1), quick());
    void* p = stack.top->allocate(64);
    ASSERT_NE(p, nullptr);
    stack.top->deallocate(p, 64);
    EXPECT_EQ(stack.stats->snapshot()["recovered.search"], 1);
  }
  { // a release callback frees what is needed
    auto dev = std::make_shared<SimulatedDevice>(1000);
    auto stack = makeStack(dev, quick());
    void* held = stack.top->allocate(800);
    stack.retry->addReleaseCallback([&](std::size_t) {
      stack.top->deallocate(held, 800);
      held = nullptr;
      return std::size_t{800};
    });
    void* p = stack.top->allocate(600);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(held, nullptr);
    EXPECT_EQ(stack.stats->snapshot()["recovered.callbacks"], 1);
    stack.top->deallocate(p, 600);
  }
  { // the cache is emptied
    auto dev = std::make_shared<SimulatedDevice>(1000);
    dev->cacheFrees(true);
    auto stack = makeStack(dev, quick());
    stack.top->deallocate(stack.top->allocate(900), 900); // now cached, still counted
    EXPECT_EQ(dev->cached(), 900u);
    void* p = stack.top->allocate(500); // another size: the cache must go first
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(stack.stats->snapshot()["recovered.empty_cache"], 1);
    stack.top->deallocate(p, 500);
  }
  { // a free by another thread during the backoff wakes the waiter: one wait of an hour, so
    // only the wake-up can end it (a broken one hangs until the test's timeout). How soon it
    // wakes is measured by xbench-alloc.
    auto dev = std::make_shared<SimulatedDevice>(1000);
    RetryConfig c = quick();
    c.max_attempts = 1;
    c.backoff_ms = c.backoff_max_ms = c.deadline_ms = kHourMs;
    auto stack = makeStack(dev, c);
    void* held = stack.top->allocate(1000);
    std::thread other([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      stack.top->deallocate(held, 1000);
    });
    void* p = stack.top->allocate(1000);
    other.join();
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(stack.stats->snapshot()["recovered.backoff"], 1);
    stack.top->deallocate(p, 1000);
  }
}

// The needed block comes back only when the device synchronises: never an OOM.
TEST(Allocator, BlockReturnedBySynchronisationNeverRaises) {
  auto dev = std::make_shared<SimulatedDevice>(1 << 20);
  dev->deferFrees(true);
  RetryConfig c;
  c.backoff = false; // only the synchronise rung can help
  auto stack = makeStack(dev, c);
  for (int i = 0; i < 2000; ++i) {
    void* p = stack.top->allocate(1 << 20);
    ASSERT_NE(p, nullptr);
    stack.top->deallocate(p, 1 << 20); // pending until synchronize()
  }
  auto m = stack.stats->snapshot();
  EXPECT_EQ(m["num_ooms"], 0);
  EXPECT_EQ(m["recovered.synchronize"], 1999);
}

TEST(Allocator, CountersMatchAnIndependentTallyAcrossThreads) {
  auto dev = std::make_shared<SimulatedDevice>(std::size_t{1} << 30);
  auto stack = makeStack(dev, quick());
  constexpr int kThreads = 4, kOps = 20000;
  struct Tally {
    std::int64_t allocs = 0, frees = 0, bytes_in = 0, bytes_out = 0;
  };
  std::vector<Tally> tallies(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 1);
      std::vector<std::pair<void*, std::size_t>> live;
      Tally& tally = tallies[static_cast<std::size_t>(t)];
      for (int i = 0; i < kOps; ++i) {
        if (live.empty() || rng() % 3 != 0) {
          const std::size_t n = 1 + rng() % 4096;
          live.emplace_back(stack.top->allocate(n), n);
          ++tally.allocs;
          tally.bytes_in += static_cast<std::int64_t>(n);
        } else {
          const std::size_t k = rng() % live.size();
          stack.top->deallocate(live[k].first, live[k].second);
          ++tally.frees;
          tally.bytes_out += static_cast<std::int64_t>(live[k].second);
          live[k] = live.back();
          live.pop_back();
        }
      }
      for (auto& [p, n] : live) {
        stack.top->deallocate(p, n);
        ++tally.frees;
        tally.bytes_out += static_cast<std::int64_t>(n);
      }
    });
  for (auto& th : threads)
    th.join();
  Tally sum;
  for (const auto& t : tallies) {
    sum.allocs += t.allocs;
    sum.frees += t.frees;
    sum.bytes_in += t.bytes_in;
    sum.bytes_out += t.bytes_out;
  }
  auto m = stack.stats->snapshot();
  EXPECT_EQ(m["allocation.all.allocated"], static_cast<double>(sum.allocs));
  EXPECT_EQ(m["allocation.all.freed"], static_cast<double>(sum.frees));
  EXPECT_EQ(m["allocated_bytes.all.allocated"], static_cast<double>(sum.bytes_in));
  EXPECT_EQ(m["allocated_bytes.all.freed"], static_cast<double>(sum.bytes_out));
  EXPECT_EQ(m["allocated_bytes.all.current"], 0);
  EXPECT_GT(m["allocated_bytes.all.peak"], 0);
  EXPECT_LE(m["largest_request_bytes"], 4096);
  EXPECT_EQ(dev->used(), 0u);
}

TEST(Allocator, LogWritesOneJsonLinePerEvent) {
  const std::string path = ::testing::TempDir() + "xalloc-log-" + std::to_string(::getpid());
  std::remove(path.c_str());
  {
    auto stack = makeStack(std::make_shared<SimulatedDevice>(1000), quick(), nullptr, true, path);
    void* a = stack.top->allocate(100);
    void* b = stack.top->allocate(200);
    stack.top->deallocate(a, 100);
    stack.top->deallocate(b, 200);
  }
  std::ifstream in(path);
  std::string line;
  int allocs = 0, frees = 0;
  while (std::getline(in, line)) {
    ASSERT_EQ(line.front(), '{');
    ASSERT_EQ(line.back(), '}');
    allocs += line.find("\"event\":\"alloc\"") != std::string::npos;
    frees += line.find("\"event\":\"free\"") != std::string::npos;
  }
  EXPECT_EQ(allocs, 2);
  EXPECT_EQ(frees, 2);
  std::remove(path.c_str());
}

TEST(Allocator, ConfigurationFromTheEnvironment) {
  ::setenv("XALLOC_MAX_RETRIES", "7", 1);
  ::setenv("XALLOC_BACKOFF_MS", "2.5", 1);
  ::setenv("XALLOC_DEADLINE_MS", "100", 1);
  ::setenv("XALLOC_STEPS", "search,backoff", 1);
  RetryConfig c = RetryConfig::fromEnvironment();
  EXPECT_EQ(c.max_attempts, 7);
  EXPECT_EQ(c.backoff_ms, 2.5);
  EXPECT_EQ(c.deadline_ms, 100);
  EXPECT_TRUE(c.search_again && c.backoff);
  EXPECT_FALSE(c.release_callbacks || c.empty_cache || c.synchronize || c.ask_peers);
  ::setenv("XALLOC_STEPS", "search,pray", 1);
  EXPECT_THROW(RetryConfig::fromEnvironment(), std::invalid_argument);
  ::setenv("XALLOC_STEPS", "none", 1);
  ::setenv("XALLOC_BACKOFF_MS", "soon", 1);
  EXPECT_THROW(RetryConfig::fromEnvironment(), std::invalid_argument);
  // A retry count is a whole number, said with its range in plain numbers.
  ::setenv("XALLOC_BACKOFF_MS", "1", 1);
  ::setenv("XALLOC_MAX_RETRIES", "2.5", 1);
  try {
    RetryConfig::fromEnvironment();
    ADD_FAILURE() << "XALLOC_MAX_RETRIES=2.5 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "XALLOC_MAX_RETRIES='2.5': expected an integer in [0, 1e+06]");
  }
  for (const char* v :
       {"XALLOC_MAX_RETRIES", "XALLOC_BACKOFF_MS", "XALLOC_DEADLINE_MS", "XALLOC_STEPS"})
    ::unsetenv(v);
}

// ---- two real processes through the ledger -----------------------------------------------------

struct Peer {
  pid_t pid = -1;
  std::FILE* out = nullptr;
  std::string readLine() {
    char buf[256] = {};
    return std::fgets(buf, sizeof buf, out) ? std::string(buf) : std::string();
  }
  int wait() {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (out)
      std::fclose(out);
    out = nullptr;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

Peer spawnPeer(std::vector<std::string> args) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  args.insert(args.begin(), XALLOC_LEDGER_PEER);
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  Peer p;
  EXPECT_EQ(::posix_spawn(&p.pid, XALLOC_LEDGER_PEER, &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  p.out = ::fdopen(fds[0], "r");
  return p;
}

TEST(Ledger, APeersReleaseWakesTheWaiter) {
  const std::string name = uniqueLedger("release");
  Ledger::unlink(name);
  constexpr std::int64_t kCap = 1 << 20;
  auto ledger = Ledger::open(name, kCap);
  auto dev = std::make_shared<SimulatedDevice>(kCap, ledger);
  RetryConfig c;
  c.max_attempts = 1; // one wait of an hour: only the ledger's wake-up can end it
  c.backoff_ms = c.backoff_max_ms = c.deadline_ms = kHourMs;
  auto stack = makeStack(dev, c, ledger);
  for (int round = 0; round < 5; ++round) {
    Peer peer = spawnPeer({"hold", name, std::to_string(kCap), std::to_string(kCap * 3 / 4),
                           std::to_string(100 + 37 * round)});
    ASSERT_EQ(peer.readLine(), "held\n");
    void* p = stack.top->allocate(kCap / 2); // does not fit until the peer releases
    const std::string released = peer.readLine();
    ASSERT_EQ(released.rfind("released ", 0), 0u) << released;
    EXPECT_EQ(peer.wait(), 0);
    ASSERT_NE(p, nullptr);
    stack.top->deallocate(p, kCap / 2);
  }
  EXPECT_EQ(stack.stats->snapshot()["num_ooms"], 0);
  EXPECT_EQ(stack.stats->snapshot()["recovered.backoff"], 5);
  Ledger::unlink(name);
}

TEST(Ledger, PeerReleasesItsCacheWhenAsked) {
  const std::string name = uniqueLedger("cache");
  Ledger::unlink(name);
  constexpr std::int64_t kCap = 1 << 20;
  auto ledger = Ledger::open(name, kCap);
  Peer peer = spawnPeer({"cache", name, std::to_string(kCap), std::to_string(kCap * 3 / 4)});
  ASSERT_EQ(peer.readLine(), "cached\n");
  auto dev = std::make_shared<SimulatedDevice>(kCap, ledger);
  RetryConfig c;
  c.deadline_ms = 5000;
  auto stack = makeStack(dev, c, ledger);
  void* p = stack.top->allocate(kCap / 2);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(peer.readLine().rfind("released ", 0), 0u);
  EXPECT_EQ(peer.wait(), 0) << "the peer did not release its cache";
  stack.top->deallocate(p, kCap / 2);
  Ledger::unlink(name);
}

TEST(Ledger, AKilledPeersMemoryIsReclaimed) {
  const std::string name = uniqueLedger("killed");
  Ledger::unlink(name);
  constexpr std::int64_t kCap = 1 << 20;
  auto ledger = Ledger::open(name, kCap);
  Peer peer = spawnPeer({"forever", name, std::to_string(kCap), std::to_string(kCap)});
  ASSERT_EQ(peer.readLine(), "held\n");
  bool peer_seen = false;
  for (const auto& p : ledger->peers())
    peer_seen |= p.pid == peer.pid && p.used == kCap;
  EXPECT_TRUE(peer_seen);
  auto dev = std::make_shared<SimulatedDevice>(kCap, ledger);
  RetryConfig c;
  c.deadline_ms = 5000;
  auto stack = makeStack(dev, c, ledger);
  ::kill(peer.pid, SIGKILL); // a zombie until reaped below: must count as dead already
  void* p = stack.top->allocate(kCap / 2);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(stack.stats->snapshot()["num_ooms"], 0);
  peer.wait();
  for (const auto& q : ledger->peers())
    EXPECT_NE(q.pid, peer.pid);
  stack.top->deallocate(p, kCap / 2);
  Ledger::unlink(name);
}

} // namespace
