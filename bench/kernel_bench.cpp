// The async runtime's conversion kernel against a plain contiguous copy of the same bytes (the
// physical floor) and against ATen's `.contiguous()`. Two comparisons, each interleaved, median
// of 30:
//   kernel: the conversion into an output that already exists, against a plain copy between
//           two existing buffers of the same size: the kernel's bandwidth as a fraction of the
//           copy's (bytes read + written per second);
//   fresh:  a whole conversion that allocates its output (contiguousFast, huge pages asked for
//           from 4 MiB) against ATen's `.contiguous()`, and the plain copy into memory fresh
//           from libtorch's allocator, which pays 4 KiB page faults.
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
      {"float32 [12,197,64] -> [12,64,197] (attn K^T)", at::randn({12, 197, 64}).transpose(1, 2)},
      {"float32 split heads K^T [4,12,64,197] (ld 768)",
       at::randn({4, 197, 12, 64}).permute({0, 2, 3, 1})},
      {"float32 [1024,4096][:, 1024:3072].t() (ld 4096)",
       at::randn({1024, 4096}).narrow(1, 1024, 2048).t()},
      {"float16 [2048,2048].t()", at::randn({2048, 2048}).to(at::kHalf).t()},
      {"float64 [2048,1024].t()", at::randn({2048, 1024}, at::kDouble).t()},
  };
  std::printf("%-48s %6s | %8s %8s %7s | %8s %8s %8s %7s %7s\n", "layout", "MiB", "kernel", "copy",
              "kernel/", "fresh", "ATen", "copy+new", "fresh/", "fresh/");
  std::printf("%-48s %6s | %8s %8s %7s | %8s %8s %8s %7s %7s\n", "", "", "GB/s", "GB/s", "copy",
              "GB/s", "GB/s", "GB/s", "ATen", "cp+new");
  for (auto& c : cases) {
    const double bytes = static_cast<double>(c.view.numel() * c.view.element_size());
    at::Tensor plain_src = at::empty({c.view.numel()}, c.view.options());
    plain_src.copy_(c.view.reshape({-1}));
    at::Tensor plain_dst = at::empty_like(plain_src);
    at::Tensor out = at::empty(c.view.sizes(), c.view.options());
    at::Tensor sink;
    auto [k, p, d1] = profiler::timeInterleaved([&] { runtime::contiguousInto(c.view, out); },
                                                [&] { plain_dst.copy_(plain_src); }, 3, 30);
    auto [f, a, d2] = profiler::timeInterleaved([&] { sink = runtime::contiguousFast(c.view); },
                                                [&] { sink = c.view.contiguous(); }, 3, 30);
    auto [f2, pn, d3] = profiler::timeInterleaved(
        [&] { sink = runtime::contiguousFast(c.view); },
        [&] { sink = at::empty_like(plain_src).copy_(plain_src); }, 3, 30);
    (void)d1;
    (void)d2;
    (void)d3;
    (void)f2;
    auto gbps = [&](double ms) {
      return 2 * bytes / (ms * 1e-3) / 1e9;
    };
    std::printf("%-48s %6.1f | %8.2f %8.2f %7.2f | %8.2f %8.2f %8.2f %7.2f %7.2f%s\n", c.name,
                bytes / (1 << 20), gbps(k.median_ms), gbps(p.median_ms), p.median_ms / k.median_ms,
                gbps(f.median_ms), gbps(a.median_ms), gbps(pn.median_ms), a.median_ms / f.median_ms,
                pn.median_ms / f.median_ms,
                runtime::hasFastKernel(c.view) ? "" : "  (ATen's kernel)");
  }
  return 0;
}
