// Progress of long profiling runs on stderr: on a terminal, a one-line bar redrawn at most ten
// times a second and erased when done; elsewhere (a CI log, nohup), a plain line every `every`
// once a run has lasted that long, so a short run prints nothing; silent when asked to be quiet.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace xalloc::profiler {

class Progress {
public:
  /// `enabled` false makes every call a no-op.
  explicit Progress(bool enabled, std::chrono::milliseconds every = std::chrono::seconds(30));
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void phase(const std::string& name, std::size_t total);
  void tick(std::size_t done);
  void finish();

private:
  void draw(bool force);
  bool on_ = false, tty_ = false;
  std::chrono::milliseconds every_;
  std::chrono::steady_clock::time_point start_, last_line_;
  std::string phase_;
  std::size_t total_ = 0, done_ = 0;
  std::chrono::steady_clock::time_point last_draw_;
  bool drawn_ = false;
};

} // namespace xalloc::profiler
