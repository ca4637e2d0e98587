// The async runtime's conversion kernel against ATen's `.contiguous()` and against a plain
// contiguous copy of the same bytes (the physical floor): effective bandwidth (bytes read +
// written per second) and the fraction of the plain copy's. Interleaved, median of 30.
#include <cstdio>
#include <vector>

#include <ATen/ATen.h>

#include "xalloc/profiler/measure.h"
#include "xalloc/runtime/async.h"

using namespace xalloc;

int main() {
  struct Case {
    const char* name;
    at::Tensor view;
  };
  std::vector<Case> cases = {
      {"float32 [1024,1024].t()", at::randn({1024, 1024}).t()},
      {"float32 [4096,4096].t()", at::randn({4096, 4096}).t()},
      {"float32 [64,256,256].transpose(1,2)", at::randn({64, 256, 256}).transpose(1, 2)},
      {"float32 [8,128,64,64] heads: permute(0,2,1,3)",
       at::randn({8, 128, 4, 64}).permute({0, 2, 1, 3})},
      {"float16 [2048,2048].t()", at::randn({2048, 2048}).to(at::kHalf).t()},
      {"float64 [2048,1024].t()", at::randn({2048, 1024}, at::kDouble).t()},
  };
  std::printf("%-48s %6s %8s %8s %8s %9s %8s %8s %8s\n", "layout", "MiB", "kernel", "ATen", "copy",
              "copy+new", "kernel/", "kernel/", "ATen/");
  std::printf("%-48s %6s %8s %8s %8s %9s %8s %8s %8s\n", "", "", "GB/s", "GB/s", "GB/s", "GB/s",
              "copy", "copy+new", "copy");
  for (auto& c : cases) {
    const double bytes = static_cast<double>(c.view.numel() * c.view.element_size());
    at::Tensor plain_src = at::empty({c.view.numel()}, c.view.options());
    plain_src.copy_(c.view.reshape({-1}));
    at::Tensor plain_dst = at::empty_like(plain_src);
    at::Tensor sink;
    auto [k, a, d1] = profiler::timeInterleaved([&] { sink = runtime::contiguousFast(c.view); },
                                                [&] { sink = c.view.contiguous(); }, 3, 30);
    auto [k2, p, d2] = profiler::timeInterleaved([&] { sink = runtime::contiguousFast(c.view); },
                                                 [&] { plain_dst.copy_(plain_src); }, 3, 30);
    // A conversion also allocates its output: a plain copy into fresh memory is its real floor.
    auto [k3, pn, d3] = profiler::timeInterleaved(
        [&] { sink = runtime::contiguousFast(c.view); },
        [&] { sink = at::empty_like(plain_src).copy_(plain_src); }, 3, 30);
    auto gbps = [&](double ms) {
      return 2 * bytes / (ms * 1e-3) / 1e9;
    };
    std::printf("%-48s %6.1f %8.2f %8.2f %8.2f %9.2f %8.2f %8.2f %8.2f%s\n", c.name,
                bytes / (1 << 20), gbps(k.median_ms), gbps(a.median_ms), gbps(p.median_ms),
                gbps(pn.median_ms), p.median_ms / k.median_ms, pn.median_ms / k.median_ms,
                p.median_ms / a.median_ms,
                runtime::hasFastKernel(c.view) ? "" : "  (ATen's kernel)");
    (void)d3;
    (void)k3;
    (void)d1;
    (void)d2;
    (void)k2;
  }
  return 0;
}
