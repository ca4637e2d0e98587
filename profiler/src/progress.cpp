// Progress: a throttled one-line bar on a terminal, plain periodic lines elsewhere, on stderr.
#include "xalloc/profiler/progress.h"

#include <cstdio>

#include <unistd.h>

namespace xalloc::profiler {

Progress::Progress(bool enabled, std::chrono::milliseconds every)
    : on_(enabled), tty_(::isatty(STDERR_FILENO) != 0), every_(every),
      start_(std::chrono::steady_clock::now()), last_line_(start_) {}

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
  if (!tty_) {
    if (now - last_line_ < every_)
      return;
    last_line_ = now;
    const auto s = std::chrono::duration_cast<std::chrono::seconds>(now - start_).count();
    std::fprintf(stderr, "xprof: %s %zu/%zu (%lldm%02llds)\n", phase_.c_str(), done_, total_,
                 static_cast<long long>(s / 60), static_cast<long long>(s % 60));
    std::fflush(stderr);
    return;
  }
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
  if (on_ && tty_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

} // namespace xalloc::profiler
