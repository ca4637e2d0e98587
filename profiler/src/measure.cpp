// Timing helpers: repeated and interleaved measurements, robust statistics.
#include "xalloc/profiler/measure.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <malloc.h>
#include <unistd.h>

namespace xalloc::profiler {

namespace {
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty())
    return 0;
  double pos = q * static_cast<double>(sorted.size() - 1);
  auto lo = static_cast<std::size_t>(pos);
  std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return sorted[lo] * (1 - frac) + sorted[hi] * frac;
}
} // namespace

TimingStats summarize(std::vector<double> samples_ms) {
  TimingStats s;
  std::vector<double> sorted = samples_ms;
  std::sort(sorted.begin(), sorted.end());
  s.median_ms = quantile(sorted, 0.5);
  s.iqr_ms = quantile(sorted, 0.75) - quantile(sorted, 0.25);
  s.samples_ms = std::move(samples_ms);
  return s;
}

TimingStats timeRepeated(const std::function<void()>& f, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i)
    f();
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(repeats));
  for (int i = 0; i < repeats; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    samples.push_back(msSince(t0));
  }
  return summarize(std::move(samples));
}

PairedTiming timeInterleaved(const std::function<void()>& a, const std::function<void()>& b,
                             int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) {
    a();
    b();
  }
  std::vector<double> sa, sb;
  sa.reserve(static_cast<std::size_t>(repeats));
  sb.reserve(static_cast<std::size_t>(repeats));
  auto timeOne = [](const std::function<void()>& f, std::vector<double>& out) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    out.push_back(msSince(t0));
  };
  for (int i = 0; i < repeats; ++i) {
    if (i % 2 == 0) {
      timeOne(a, sa);
      timeOne(b, sb);
    } else {
      timeOne(b, sb);
      timeOne(a, sa);
    }
  }
  std::vector<double> delta(sa.size());
  for (std::size_t i = 0; i < sa.size(); ++i)
    delta[i] = sb[i] - sa[i];
  return {summarize(std::move(sa)), summarize(std::move(sb)), summarize(std::move(delta))};
}

Counts budgetedCounts(double run_ms, int warmup, int repeats, double budget_ms, int min_repeats) {
  Counts c{warmup, repeats};
  const double fit = std::floor(budget_ms / run_ms * (1 + 1e-9)); // 1000/15 ms fits 15 times
  if (!(run_ms > 0) || fit >= repeats)
    return c;
  c.repeats =
      std::clamp(static_cast<int>(std::min(fit, 1e6)), std::min(min_repeats, repeats), repeats);
  // A run this slow is past the caches' and the allocator's first-touch effects after one call.
  c.warmup = std::min(warmup, 1);
  return c;
}

double processCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double processAgeMs() {
  // Field 22 of /proc/self/stat: the start time in clock ticks after boot. The command name
  // (field 2) is in parentheses and may hold spaces: read after its closing one.
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i < 22)
      continue;
    const long ticks = ::sysconf(_SC_CLK_TCK);
    timespec now{};
    if (ticks <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0)
      return 0;
    const double started_ms =
        std::strtod(field.c_str(), nullptr) * 1e3 / static_cast<double>(ticks);
    const double now_ms =
        static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) * 1e-6;
    return std::max(0.0, now_ms - started_ms);
  }
  return 0;
}

void steadyStateMalloc() {
  static bool done = false;
  if (done)
    return;
  done = true;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

} // namespace xalloc::profiler
