// A one-line progress bar on stderr for long profiling runs: silent when stderr is not a
// terminal or when asked to be quiet, redrawn at most ten times a second, erased when done.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace xalloc::profiler {

class Progress {
public:
  /// `enabled` false makes every call a no-op; true still stays silent off a terminal.
  explicit Progress(bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void phase(const std::string& name, std::size_t total);
  void tick(std::size_t done);
  void finish();

private:
  void draw(bool force);
  bool on_ = false;
  std::string phase_;
  std::size_t total_ = 0, done_ = 0;
  std::chrono::steady_clock::time_point last_draw_;
  bool drawn_ = false;
};

} // namespace xalloc::profiler
