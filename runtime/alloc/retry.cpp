// RetryConfig (from XALLOC_* variables) and RetryStage, the ladder that retries before failing.
#include "xalloc/runtime/retry.h"

#include "xalloc/runtime/ledger.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <thread>

#include "alloc_detail.h"

namespace xalloc::runtime {

using detail::bytesText;
using detail::nowMs;

RetryConfig RetryConfig::fromEnvironment() {
  RetryConfig c;
  auto number = [](const char* var, double lo, double hi, double& out, bool integer = false) {
    const char* v = std::getenv(var);
    if (!v || !*v)
      return;
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(x >= lo && x <= hi) || (integer && x != std::floor(x))) {
      char range[96];
      std::snprintf(range, sizeof range, "%s in [%g, %g]", integer ? "an integer" : "a number", lo,
                    hi);
      throw std::invalid_argument(std::string(var) + "='" + v + "': expected " + range);
    }
    out = x;
  };
  double attempts = c.max_attempts;
  number("XALLOC_MAX_RETRIES", 0, 1e6, attempts, true);
  c.max_attempts = static_cast<int>(attempts);
  number("XALLOC_BACKOFF_MS", 0, 6e4, c.backoff_ms);
  number("XALLOC_BACKOFF_MAX_MS", 0, 6e5, c.backoff_max_ms);
  number("XALLOC_JITTER", 0, 1, c.jitter);
  number("XALLOC_DEADLINE_MS", 0, 3.6e6, c.deadline_ms);
  if (const char* steps = std::getenv("XALLOC_STEPS"); steps && *steps) {
    c.search_again = c.release_callbacks = c.empty_cache = c.synchronize = c.ask_peers = c.backoff =
        false;
    std::stringstream ss(steps);
    std::string step;
    while (std::getline(ss, step, ',')) {
      if (step == "search")
        c.search_again = true;
      else if (step == "callbacks")
        c.release_callbacks = true;
      else if (step == "empty_cache")
        c.empty_cache = true;
      else if (step == "synchronize")
        c.synchronize = true;
      else if (step == "peers")
        c.ask_peers = true;
      else if (step == "backoff")
        c.backoff = true;
      else if (step != "none")
        throw std::invalid_argument("XALLOC_STEPS: unknown step '" + step +
                                    "' (search, callbacks, empty_cache, synchronize, peers, "
                                    "backoff, none)");
    }
  }
  return c;
}

// ---- RetryStage -------------------------------------------------------------------------------

RetryStage::RetryStage(std::shared_ptr<Upstream> up, RetryConfig config,
                       std::shared_ptr<Stats> stats, std::shared_ptr<Ledger> ledger)
    : up_(std::move(up)), config_(config), stats_(std::move(stats)), ledger_(std::move(ledger)) {}

int RetryStage::addReleaseCallback(ReleaseCallback cb) {
  int id = 0;
  {
    std::lock_guard<std::mutex> g(cb_mu_);
    id = next_cb_++;
  }
  addReleaseCallback(id, std::move(cb));
  return id;
}

void RetryStage::addReleaseCallback(int id, ReleaseCallback cb) {
  std::lock_guard<std::mutex> g(cb_mu_);
  callbacks_.emplace_back(id, std::move(cb));
}

void RetryStage::removeReleaseCallback(int id) {
  std::lock_guard<std::mutex> g(cb_mu_);
  callbacks_.erase(std::remove_if(callbacks_.begin(), callbacks_.end(),
                                  [&](const auto& c) { return c.first == id; }),
                   callbacks_.end());
}

void* RetryStage::allocate(std::size_t bytes) {
  if (void* p = up_->allocate(bytes))
    return p;
  return slowPath(bytes);
}

void RetryStage::deallocate(void* p, std::size_t bytes) {
  up_->deallocate(p, bytes);
  // A waiter registers before its last retry, so a free that sees no waiter happened before
  // that retry and is found by it.
  if (waiters_.load() > 0) {
    free_epoch_.fetch_add(1);
    std::lock_guard<std::mutex> g(wait_mu_);
    freed_.notify_all();
  }
}

namespace {
// How deep the calling thread is in a ladder: a release callback that allocates comes back to
// the ladder, which must not call it again (it re-entered 498 times, 4.2 s past a 0.3 s
// deadline).
thread_local int t_ladder_depth = 0;
struct LadderScope {
  LadderScope() { ++t_ladder_depth; }
  ~LadderScope() { --t_ladder_depth; }
};
} // namespace

void* RetryStage::slowPath(std::size_t bytes) {
  const double t0 = nowMs();
  const double deadline = t0 + config_.deadline_ms;
  const bool nested = t_ladder_depth > 0;
  LadderScope scope;
  auto recovered = [&](const char* step, void* p) {
    if (stats_)
      stats_->onRecovered(step, nowMs() - t0);
    return p;
  };
  auto retry = [&]() {
    if (stats_)
      stats_->onRetry();
    return up_->allocate(bytes);
  };
  if (config_.search_again || nested)
    if (void* p = retry())
      return recovered("search", p);
  if (nested) {
    // Inside a release callback (or what it called): one more try, then the error, at once.
    if (stats_)
      stats_->onOom();
    std::ostringstream msg;
    msg << "out of memory: cannot allocate " << bytesText(static_cast<double>(bytes)) << " on "
        << up_->name() << " inside a release callback (the ladder does not call callbacks again "
        << "from one)";
    throw OutOfMemory(bytes, msg.str());
  }
  if (config_.release_callbacks) {
    std::vector<ReleaseCallback> cbs;
    {
      std::lock_guard<std::mutex> g(cb_mu_);
      for (auto& c : callbacks_)
        cbs.push_back(c.second);
    }
    for (auto& cb : cbs) {
      if (nowMs() >= deadline)
        break; // the deadline holds for callbacks too
      std::size_t freed = 0;
      try {
        freed = cb(bytes);
      } catch (const std::exception&) {
        freed = 0; // it failed (an allocation it made ran out too): it freed nothing
      }
      if (freed > 0)
        if (void* p = retry())
          return recovered("callbacks", p);
    }
  }
  if (config_.empty_cache && up_->emptyCache() > 0)
    if (void* p = retry())
      return recovered("empty_cache", p);
  if (config_.synchronize) {
    up_->synchronize();
    if (void* p = retry())
      return recovered("synchronize", p);
  }
  if (config_.ask_peers && ledger_)
    ledger_->requestRelease(static_cast<std::int64_t>(bytes));
  if (config_.backoff) {
    // Wait, doubling up to backoff_max_ms with jitter, until the deadline or the attempt cap;
    // a free in this process or a release by a peer ends a wait early.
    thread_local std::mt19937_64 rng(std::random_device{}());
    double wait = std::max(config_.backoff_ms, 0.01);
    for (int attempt = 0; attempt < config_.max_attempts; ++attempt) {
      const double left = deadline - nowMs();
      if (left <= 0)
        break;
      const double jitter =
          1.0 + config_.jitter * std::uniform_real_distribution<double>(-1.0, 1.0)(rng);
      const double slice = std::min(left, wait * jitter);
      waiters_.fetch_add(1);
      const std::uint64_t free_seen = free_epoch_.load();
      const std::uint64_t peer_seen = ledger_ ? ledger_->releaseEpoch() : 0;
      if (void* p = retry()) { // frees before the registration are visible now
        waiters_.fetch_sub(1);
        return recovered("backoff", p);
      }
      const double until = nowMs() + slice;
      {
        std::unique_lock<std::mutex> lk(wait_mu_);
        // Peers signal through shared memory, which a condition variable cannot watch: poll
        // it every 0.5 ms while waiting for a local free.
        while (nowMs() < until && free_epoch_.load() == free_seen &&
               (!ledger_ || ledger_->releaseEpoch() == peer_seen)) {
          const double step = std::min(until - nowMs(), ledger_ ? 0.5 : until - nowMs());
          freed_.wait_for(lk, std::chrono::microseconds(
                                  static_cast<std::int64_t>(std::max(step, 0.0) * 1000) + 1));
        }
      }
      waiters_.fetch_sub(1);
      if (config_.synchronize)
        up_->synchronize();
      if (void* p = retry())
        return recovered("backoff", p);
      if (config_.ask_peers && ledger_)
        ledger_->requestRelease(static_cast<std::int64_t>(bytes));
      wait = std::min(wait * 2, std::max(config_.backoff_max_ms, config_.backoff_ms));
    }
  }
  if (stats_)
    stats_->onOom();
  std::ostringstream msg;
  msg << "out of memory: cannot allocate " << bytesText(static_cast<double>(bytes)) << " on "
      << up_->name() << " after " << (nowMs() - t0) << " ms of retries";
  if (stats_)
    msg << "; " << stats_->summary();
  throw OutOfMemory(bytes, msg.str());
}

} // namespace xalloc::runtime
