// Progress: a throttled single-line progress bar on stderr.
#include "xalloc/profiler/progress.h"

#include <cstdio>

#include <unistd.h>

namespace xalloc::profiler {

Progress::Progress(bool enabled) : on_(enabled && ::isatty(STDERR_FILENO)) {}

Progress::~Progress() {
  finish();
}

void Progress::phase(const std::string& name, std::size_t total) {
  phase_ = name;
  total_ = total;
  done_ = 0;
  draw(true);
}

void Progress::tick(std::size_t done) {
  done_ = done;
  draw(done == total_);
}

void Progress::draw(bool force) {
  if (!on_)
    return;
  auto now = std::chrono::steady_clock::now();
  if (!force && drawn_ && now - last_draw_ < std::chrono::milliseconds(100))
    return;
  last_draw_ = now;
  drawn_ = true;
  constexpr int kWidth = 24;
  const int filled = total_ ? static_cast<int>(kWidth * done_ / total_) : kWidth;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r\033[Kxprof: [%s] %s %zu/%zu", bar.c_str(), phase_.c_str(), done_,
               total_);
  std::fflush(stderr);
}

void Progress::finish() {
  if (on_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

} // namespace xalloc::profiler
