// The worker pool under ThreadSanitizer (built with -fsanitize=thread): many producers, many
// jobs, a destructor that drains the queue.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "xalloc/runtime/worker_pool.h"

using xalloc::runtime::WorkerPool;

TEST(WorkerPool, RunsEveryJobOnceFromManyThreads) {
  for (int workers : {1, 2, 4}) {
    std::vector<int> done(8 * 5000, 0);
    std::atomic<int> total{0};
    {
      WorkerPool pool(workers);
      std::vector<std::thread> producers;
      for (int p = 0; p < 8; ++p)
        producers.emplace_back([&, p] {
          for (int i = 0; i < 5000; ++i)
            pool.submit([&, k = p * 5000 + i] {
              done[static_cast<std::size_t>(k)] += 1; // each slot written by one job only
              total.fetch_add(1);
            });
        });
      for (auto& t : producers)
        t.join();
    } // the destructor runs what is queued
    EXPECT_EQ(total.load(), 8 * 5000);
    for (int d : done)
      ASSERT_EQ(d, 1);
  }
}

TEST(WorkerPool, HandsResultsBackThroughPromises) {
  WorkerPool pool(2);
  std::vector<int> results(1000, 0);
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  for (int i = 0; i < 1000; ++i)
    pool.submit([&, i] {
      const int r = i * i;
      std::lock_guard<std::mutex> g(mu);
      results[static_cast<std::size_t>(i)] = r;
      ++finished;
      cv.notify_one();
    });
  std::unique_lock<std::mutex> lk(mu);
  cv.wait(lk, [&] { return finished == 1000; });
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(results[static_cast<std::size_t>(i)], i * i);
}
