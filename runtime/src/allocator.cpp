// Stats, the log and retry stages, the simulated device, and the default stack.
#include "xalloc/runtime/allocator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include "xalloc/runtime/ledger.h"

namespace xalloc::runtime {

namespace {
std::string bytesText(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::abs(b) >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

double nowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
} // namespace

// ---- Stats ------------------------------------------------------------------------------------

namespace {
std::atomic<std::uint64_t> next_stats_id{1};
inline void bump(std::atomic<std::int64_t>& a, std::int64_t by) { // single writer
  a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}
} // namespace

Stats::Stats() : id_(next_stats_id.fetch_add(1)) {}

Stats::Shard& Stats::shard() {
  // Ids, not addresses, name a Stats here: a new one may reuse a destroyed one's address.
  thread_local std::uint64_t last_id = 0;
  thread_local Shard* last = nullptr;
  if (last_id == id_)
    return *last;
  thread_local std::map<std::uint64_t, Shard*> mine;
  Shard*& s = mine[id_];
  if (!s) {
    std::lock_guard<std::mutex> g(shards_mu_);
    shards_.push_back(std::make_unique<Shard>());
    s = shards_.back().get();
  }
  last_id = id_;
  last = s;
  return *s;
}

void Stats::flush(Shard& s) {
  const std::int64_t now = current_.fetch_add(s.pending, std::memory_order_relaxed) + s.pending;
  s.pending = 0;
  std::int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void Stats::onAlloc(std::size_t bytes) {
  Shard& s = shard();
  const auto b = static_cast<std::int64_t>(bytes);
  bump(s.allocs, 1);
  bump(s.bytes_in, b);
  if ((s.pending += b) >= kFlushBytes)
    flush(s);
  if (b > s.largest) {
    s.largest = b;
    std::int64_t largest = largest_.load(std::memory_order_relaxed);
    while (b > largest && !largest_.compare_exchange_weak(largest, b, std::memory_order_relaxed)) {
    }
  }
}

void Stats::onFree(std::size_t bytes) {
  Shard& s = shard();
  const auto b = static_cast<std::int64_t>(bytes);
  bump(s.frees, 1);
  bump(s.bytes_out, b);
  if ((s.pending -= b) <= -kFlushBytes)
    flush(s);
}

std::int64_t Stats::current() const {
  std::lock_guard<std::mutex> g(shards_mu_);
  std::int64_t c = 0;
  for (const auto& s : shards_)
    c += s->bytes_in.load(std::memory_order_relaxed) - s->bytes_out.load(std::memory_order_relaxed);
  return c;
}

std::int64_t Stats::peak() const {
  return std::max(peak_.load(std::memory_order_relaxed), current());
}

void Stats::onOom() {
  ooms_.fetch_add(1, std::memory_order_relaxed);
}
void Stats::onRetry() {
  retries_.fetch_add(1, std::memory_order_relaxed);
}

void Stats::onRecovered(const std::string& step, double waited_ms) {
  std::lock_guard<std::mutex> g(slow_);
  ++recovered_[step];
  waits_ms_.push_back(waited_ms);
}

std::map<std::string, double> Stats::snapshot() const {
  std::map<std::string, double> m;
  std::int64_t allocs = 0, frees = 0, in = 0, out = 0;
  {
    std::lock_guard<std::mutex> g(shards_mu_);
    for (const auto& s : shards_) {
      allocs += s->allocs.load(std::memory_order_relaxed);
      frees += s->frees.load(std::memory_order_relaxed);
      in += s->bytes_in.load(std::memory_order_relaxed);
      out += s->bytes_out.load(std::memory_order_relaxed);
    }
  }
  m["allocation.all.allocated"] = static_cast<double>(allocs);
  m["allocation.all.freed"] = static_cast<double>(frees);
  m["allocation.all.current"] = static_cast<double>(allocs - frees);
  m["allocated_bytes.all.allocated"] = static_cast<double>(in);
  m["allocated_bytes.all.freed"] = static_cast<double>(out);
  m["allocated_bytes.all.current"] = static_cast<double>(in - out);
  m["allocated_bytes.all.peak"] =
      static_cast<double>(std::max(peak_.load(std::memory_order_relaxed), in - out));
  m["largest_request_bytes"] = static_cast<double>(largest_.load());
  m["num_alloc_retries"] = static_cast<double>(retries_.load());
  m["num_ooms"] = static_cast<double>(ooms_.load());
  std::lock_guard<std::mutex> g(slow_);
  std::int64_t recoveries = 0;
  for (const auto& [step, n] : recovered_) {
    m["recovered." + step] = static_cast<double>(n);
    recoveries += n;
  }
  m["recoveries"] = static_cast<double>(recoveries);
  std::vector<double> w = waits_ms_;
  std::sort(w.begin(), w.end());
  auto pct = [&](double q) {
    return w.empty() ? 0.0 : w[std::min(w.size() - 1, static_cast<std::size_t>(q * w.size()))];
  };
  m["wait_ms.p50"] = pct(0.5);
  m["wait_ms.p99"] = pct(0.99);
  m["wait_ms.max"] = w.empty() ? 0.0 : w.back();
  return m;
}

std::string Stats::summary() const {
  auto m = snapshot();
  std::ostringstream s;
  s << "allocated " << bytesText(m["allocated_bytes.all.current"]) << " (peak "
    << bytesText(m["allocated_bytes.all.peak"]) << ") in "
    << static_cast<std::int64_t>(m["allocation.all.current"]) << " blocks, "
    << static_cast<std::int64_t>(m["num_alloc_retries"]) << " retries, "
    << static_cast<std::int64_t>(m["num_ooms"]) << " out-of-memory errors, largest request "
    << bytesText(m["largest_request_bytes"]);
  return s.str();
}

void Stats::reset() {
  // Counts of events restart; bytes in use stay (they are still in use).
  {
    std::lock_guard<std::mutex> g(shards_mu_);
    for (auto& s : shards_) {
      const std::int64_t net = s->bytes_in.load() - s->bytes_out.load();
      s->allocs = 0;
      s->frees = 0;
      s->bytes_in = net;
      s->bytes_out = 0;
    }
  }
  peak_ = current();
  largest_ = 0;
  ooms_ = 0;
  retries_ = 0;
  std::lock_guard<std::mutex> g(slow_);
  recovered_.clear();
  waits_ms_.clear();
}

// ---- StatsStage -------------------------------------------------------------------------------

void* StatsStage::allocate(std::size_t bytes) {
  void* p = up_->allocate(bytes);
  if (p)
    stats_->onAlloc(bytes);
  return p;
}

void StatsStage::deallocate(void* p, std::size_t bytes) {
  if (!p)
    return;
  stats_->onFree(bytes);
  up_->deallocate(p, bytes);
}

// ---- LogStage ---------------------------------------------------------------------------------

LogStage::LogStage(std::shared_ptr<Upstream> up, const std::string& path) : up_(std::move(up)) {
  if (!path.empty()) {
    out_ = std::fopen(path.c_str(), "a");
    owned_ = out_ != nullptr;
  }
  if (!out_)
    out_ = stderr;
}

LogStage::~LogStage() {
  if (owned_)
    std::fclose(out_);
}

void LogStage::write(const std::string& line) {
  std::lock_guard<std::mutex> g(mu_);
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

void* LogStage::allocate(std::size_t bytes) {
  const double t0 = nowMs();
  void* p = up_->allocate(bytes);
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "{\"event\":\"%s\",\"bytes\":%zu,\"ptr\":\"%p\",\"ms\":%.4f,\"t_ms\":%.3f}\n",
                p ? "alloc" : "alloc_failed", bytes, p, nowMs() - t0, t0);
  write(buf);
  return p;
}

void LogStage::deallocate(void* p, std::size_t bytes) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "{\"event\":\"free\",\"bytes\":%zu,\"ptr\":\"%p\",\"t_ms\":%.3f}\n", bytes, p,
                nowMs());
  write(buf);
  up_->deallocate(p, bytes);
}

std::size_t LogStage::emptyCache() {
  const std::size_t freed = up_->emptyCache();
  char buf[120];
  std::snprintf(buf, sizeof buf, "{\"event\":\"empty_cache\",\"bytes\":%zu,\"t_ms\":%.3f}\n", freed,
                nowMs());
  write(buf);
  return freed;
}

// ---- RetryConfig ------------------------------------------------------------------------------

RetryConfig RetryConfig::fromEnvironment() {
  RetryConfig c;
  auto number = [](const char* var, double lo, double hi, double& out) {
    const char* v = std::getenv(var);
    if (!v || !*v)
      return;
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(x >= lo && x <= hi))
      throw std::invalid_argument(std::string(var) + "='" + v + "': expected a number in [" +
                                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = x;
  };
  double attempts = c.max_attempts;
  number("XALLOC_MAX_RETRIES", 0, 1e6, attempts);
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
  std::lock_guard<std::mutex> g(cb_mu_);
  callbacks_.emplace_back(next_cb_, std::move(cb));
  return next_cb_++;
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

void* RetryStage::slowPath(std::size_t bytes) {
  const double t0 = nowMs();
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
  if (config_.search_again)
    if (void* p = retry())
      return recovered("search", p);
  if (config_.release_callbacks) {
    std::vector<ReleaseCallback> cbs;
    {
      std::lock_guard<std::mutex> g(cb_mu_);
      for (auto& c : callbacks_)
        cbs.push_back(c.second);
    }
    for (auto& cb : cbs)
      if (cb(bytes) > 0)
        if (void* p = retry())
          return recovered("callbacks", p);
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
    const double deadline = t0 + config_.deadline_ms;
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

// ---- SimulatedDevice --------------------------------------------------------------------------

SimulatedDevice::SimulatedDevice(std::size_t capacity, std::shared_ptr<Ledger> ledger)
    : capacity_(capacity), ledger_(std::move(ledger)) {}

SimulatedDevice::~SimulatedDevice() {
  synchronize();
  emptyCache();
}

bool SimulatedDevice::reserve(std::size_t bytes) {
  if (ledger_)
    return ledger_->reserve(static_cast<std::int64_t>(bytes));
  if (used_ + bytes > capacity_)
    return false;
  return true;
}

void SimulatedDevice::unreserve(std::size_t bytes) {
  if (ledger_)
    ledger_->unreserve(static_cast<std::int64_t>(bytes));
}

void* SimulatedDevice::allocate(std::size_t bytes) {
  const std::size_t n = std::max<std::size_t>(bytes, 1);
  std::lock_guard<std::mutex> g(mu_);
  if (cache_) // a cached block of the same size is reused as it is
    for (auto it = cached_.begin(); it != cached_.end(); ++it)
      if (it->second == n) {
        void* p = it->first;
        cached_.erase(it);
        if (ledger_) {
          std::size_t c = 0;
          for (auto& b : cached_)
            c += b.second;
          ledger_->setCached(static_cast<std::int64_t>(c));
        }
        return p;
      }
  if (!reserve(n))
    return nullptr;
  void* p = std::malloc(n);
  if (!p) {
    unreserve(n);
    return nullptr;
  }
  used_ += n;
  return p;
}

void SimulatedDevice::deallocate(void* p, std::size_t bytes) {
  if (!p)
    return;
  const std::size_t n = std::max<std::size_t>(bytes, 1);
  std::lock_guard<std::mutex> g(mu_);
  if (defer_) {
    pending_.emplace_back(p, n);
    return;
  }
  if (cache_) {
    cached_.emplace_back(p, n);
    if (ledger_) {
      std::size_t c = 0;
      for (auto& b : cached_)
        c += b.second;
      ledger_->setCached(static_cast<std::int64_t>(c));
    }
    return;
  }
  std::free(p);
  used_ -= n;
  unreserve(n);
}

void SimulatedDevice::synchronize() {
  std::vector<std::pair<void*, std::size_t>> done;
  {
    std::lock_guard<std::mutex> g(mu_);
    done.swap(pending_);
  }
  for (auto& [p, n] : done) {
    std::lock_guard<std::mutex> g(mu_);
    if (cache_) {
      cached_.emplace_back(p, n);
      continue;
    }
    std::free(p);
    used_ -= n;
    unreserve(n);
  }
}

std::size_t SimulatedDevice::emptyCache() {
  std::lock_guard<std::mutex> g(mu_);
  std::size_t freed = 0;
  for (auto& [p, n] : cached_) {
    std::free(p);
    used_ -= n;
    unreserve(n);
    freed += n;
  }
  cached_.clear();
  if (ledger_)
    ledger_->setCached(0);
  return freed;
}

std::size_t SimulatedDevice::used() const {
  std::lock_guard<std::mutex> g(mu_);
  return used_;
}

std::size_t SimulatedDevice::cached() const {
  std::lock_guard<std::mutex> g(mu_);
  std::size_t c = 0;
  for (auto& b : cached_)
    c += b.second;
  return c;
}

// ---- makeStack --------------------------------------------------------------------------------

Stack makeStack(std::shared_ptr<Upstream> backend, const RetryConfig& config,
                std::shared_ptr<Ledger> ledger, bool log, const std::string& log_path) {
  Stack s;
  s.stats = std::make_shared<Stats>();
  if (ledger)
    ledger->startResponder([backend] { return static_cast<std::int64_t>(backend->emptyCache()); });
  s.retry = std::make_shared<RetryStage>(std::move(backend), config, s.stats, ledger);
  std::shared_ptr<Upstream> below = s.retry;
  if (log)
    below = std::make_shared<LogStage>(below, log_path);
  s.top = std::make_shared<StatsStage>(below, s.stats);
  return s;
}

} // namespace xalloc::runtime
