// Stats and StatsStage: sharded counters of one stack.
#include "xalloc/runtime/stats.h"

#include <algorithm>
#include <sstream>

#include "alloc_detail.h"

namespace xalloc::runtime {

using detail::bytesText;

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
      // Blocks in use stay counted as allocated, as their bytes do: their frees after the reset
      // would otherwise make the counts negative.
      const std::int64_t net = s->bytes_in.load() - s->bytes_out.load();
      const std::int64_t live = s->allocs.load() - s->frees.load();
      s->allocs = live;
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

} // namespace xalloc::runtime
