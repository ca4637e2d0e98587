// The packed ops and threads (packed.h, docs/runtime-ops.md): many threads at once on one op
// give one thread's results (each call its own scratchpad); after set_num_threads(1) the caller
// works alone; a child forked after two-thread calls runs the op at the one thread it sets.
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "xalloc/runtime/packed.h"

#include "packed_cases.h"

using namespace xalloc::runtime;
using namespace xalloc::testing;

namespace {
// Calls `op` on each input from its own thread, `calls` times each, all at once: how many of
// the results differ from what one thread computed.
template <class Op>
int wrongFromThreads(const Op& op, const std::vector<at::Tensor>& xs, int calls) {
  std::vector<at::Tensor> refs;
  for (const auto& x : xs)
    refs.push_back(op->reference(x));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < xs.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < calls; ++i)
        if (relError(op->run(xs[t]), refs[t]) > 1e-5)
          ++wrong;
    });
  for (auto& t : threads)
    t.join();
  return wrong.load();
}
} // namespace

TEST(PackedOps, ManyThreadsOnOneOpGiveOneThreadsResults) {
  for (const auto& c : kConvs) {
    std::vector<at::Tensor> xs;
    for (std::int64_t b : {1, 2, 1, 3})
      xs.push_back(at::randn({b, c.in, 28, 28}));
    EXPECT_EQ(wrongFromThreads(makeConv(c), xs, 60), 0)
        << c.name << ": calls from 4 threads at once gave wrong results";
  }
  at::manual_seed(5);
  auto linear = c10::make_intrusive<PackedLinear>(at::randn({256, 512}), at::randn({256}), "relu");
  std::vector<at::Tensor> xs;
  for (std::int64_t rows : {1, 7, 2, 33})
    xs.push_back(at::randn({rows, 512}));
  EXPECT_EQ(wrongFromThreads(linear, xs, 100), 0)
      << "linear_packed: calls from 4 threads at once gave wrong results";
}

namespace {
// CPU seconds each of the process's threads has used, by thread id (/proc/self/task).
std::map<long, double> threadCpuSeconds() {
  std::map<long, double> out;
  const long tick = ::sysconf(_SC_CLK_TCK);
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream f(e.path() / "stat");
    std::string line;
    std::getline(f, line);
    // Fields after the command's closing parenthesis: state is the 3rd; utime, stime the 14th
    // and 15th.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i)
      if (i >= 14)
        ticks += std::stod(field);
    out[std::stol(e.path().filename().string())] = ticks / static_cast<double>(tick);
  }
  return out;
}
} // namespace

// A primitive made at two threads is not run at two after set_num_threads(1): the calling
// thread does the work alone, as ATen's own ops do.
TEST(PackedOps, TheThreadCountIsHonouredAtEveryCall) {
  if (!hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  const int before = at::get_num_threads();
  auto conv = makeConv({"dense 3x3 wide", 64, 64, 3, 1, 1, 1, "relu"});
  const at::Tensor x = at::randn({1, 64, 56, 56});
  at::set_num_threads(2);
  for (int i = 0; i < 5; ++i)
    conv->run(x);
  at::set_num_threads(1);
  conv->run(x);
  std::this_thread::sleep_for(std::chrono::milliseconds(300)); // idle workers stop spinning
  const long self = static_cast<long>(::syscall(SYS_gettid));
  const auto t0 = threadCpuSeconds();
  for (int i = 0; i < 60; ++i)
    conv->run(x);
  const auto t1 = threadCpuSeconds();
  at::set_num_threads(before);
  double mine = 0, others = 0;
  for (const auto& [tid, s] : t1) {
    const double d = s - (t0.count(tid) ? t0.at(tid) : 0.0);
    (tid == self ? mine : others) += d;
  }
  ASSERT_GT(mine, 0.05) << "the calls took too little CPU time to judge";
  EXPECT_LT(others, 0.1 * mine) << "other threads worked " << others << " s beside the caller's "
                                << mine << " s at one thread";
}

// A child forked after two-thread calls runs the op at the one thread it sets (the parent's
// primitive would enter an OpenMP team the child does not have: GNU OpenMP hangs there).
TEST(PackedOps, AForkedChildRunsTheOpAtItsOwnThreadCount) {
  if (!hasPackedConv())
    GTEST_SKIP() << "runtime built without oneDNN";
  const int before = at::get_num_threads();
  auto conv = makeConv({"dense 3x3 wide", 64, 64, 3, 1, 1, 1, "relu"});
  const at::Tensor x = at::randn({1, 64, 28, 28});
  const at::Tensor ref = conv->reference(x);
  at::set_num_threads(2);
  for (int i = 0; i < 3; ++i)
    conv->run(x);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    at::set_num_threads(1);
    const bool ok = relError(conv->run(x), ref) < 1e-5;
    ::_exit(ok ? 0 : 3);
  }
  at::set_num_threads(before);
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 300 && done == 0; ++i) { // 30 s
    done = ::waitpid(pid, &status, WNOHANG);
    if (done == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the forked child hung in the packed convolution (killed after 30 s)";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "the child died: status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's result is not ATen's";
}
