// xalloc-gpu-bench: the CUDA conversion kernel against ATen's .contiguous() and a plain
// device-to-device copy of the same bytes, and how much conversion time the side streams hide
// behind compute. CUDA events, warm-up, median of 30, interleaved; GB/s counts bytes read and
// written. scripts/gpu-check.sh runs it on a GPU machine.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <torch/cuda.h>

#include "xalloc/runtime/async.h"

using namespace xalloc::runtime;

namespace {

// Median milliseconds of each function, the functions run interleaved.
std::vector<double> timeInterleaved(const std::vector<std::function<void()>>& fns, int reps) {
  std::vector<std::vector<double>> ms(fns.size());
  for (int r = -3; r < reps; ++r)
    for (std::size_t i = 0; i < fns.size(); ++i) {
      at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
      start.record();
      fns[i]();
      stop.record();
      stop.synchronize();
      if (r >= 0)
        ms[i].push_back(static_cast<double>(start.elapsed_time(stop)));
    }
  std::vector<double> med;
  for (auto& v : ms) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

struct Layout {
  std::string name;
  std::function<at::Tensor()> make;
};

} // namespace

int main() {
  if (!torch::cuda::is_available()) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  std::printf("device: %s\n\n", at::cuda::getCurrentDeviceProperties()->name);
  const auto f32 = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  const auto f16 = f32.dtype(at::kHalf);
  const std::vector<Layout> layouts = {
      {"float32 [8192,8192].t()",
       [&] {
         return at::randn({8192, 8192}, f32).t();
       }},
      {"float32 [4096,4096].t()",
       [&] {
         return at::randn({4096, 4096}, f32).t();
       }},
      {"float16 [8192,8192].t()",
       [&] {
         return at::randn({8192, 8192}, f16).t();
       }},
      {"float32 [64,1024,1024].transpose(1,2)",
       [&] {
         return at::randn({64, 1024, 1024}, f32).transpose(1, 2);
       }},
      {"float16 attention K^T [96,197,64]->[96,64,197]",
       [&] {
         return at::randn({96, 197, 64}, f16).transpose(1, 2);
       }},
      {"float16 heads [32,2048,32,128].transpose(1,2)",
       [&] {
         return at::randn({32, 2048, 32, 128}, f16).transpose(1, 2);
       }},
  };
  std::printf("%-48s %9s %9s %9s %11s %9s\n", "layout", "kernel", "ATen", "copy", "kernel/copy",
              "vs ATen");
  for (const auto& l : layouts) {
    const at::Tensor x = l.make();
    const at::Tensor plain = x.contiguous();
    at::Tensor out = at::empty_like(plain), copy_out = at::empty_like(plain);
    const double bytes = 2.0 * static_cast<double>(plain.nbytes());
    const auto ms = timeInterleaved({[&] { contiguousInto(x, out); }, [&] { (void)x.contiguous(); },
                                     [&] {
                                       copy_out.copy_(plain);
                                     }},
                                    30);
    const auto gbs = [&](double m) {
      return bytes / (m * 1e-3) / 1e9;
    };
    std::printf("%-48s %7.0f GB/s %5.0f GB/s %5.0f GB/s %9.2f %8.2fx%s\n", l.name.c_str(),
                gbs(ms[0]), gbs(ms[1]), gbs(ms[2]), ms[2] / ms[0], ms[1] / ms[0],
                hasFastKernel(x) ? "" : " (ATen path)");
  }

  // Hidden conversion time: per step, one conversion of an unrelated activation and then the
  // producer's work, converted in line (sync) or on the side streams (async, waited at the end).
  // Two producers: a chain of large matrix products (every SM busy) and a latency-bound chain of
  // small dependent kernels (most SMs idle, as in small-batch inference).
  const at::Tensor a = at::randn({4096, 4096}, f16), b = at::randn({4096, 4096}, f16);
  at::Tensor small = at::randn({4096}, f32);
  const at::Tensor act = at::randn({64, 1024, 512}, f16).transpose(1, 2);
  const int n = 8;
  struct Producer {
    const char* name;
    std::function<void()> step;
  };
  const std::vector<Producer> producers = {
      {"4096^2 fp16 products (SMs saturated)",
       [&] {
         (void)at::mm(a, b);
       }},
      {"48 small dependent kernels (SMs mostly idle)",
       [&] {
         for (int k = 0; k < 48; ++k)
           small.mul_(1.0001);
       }},
  };
  std::printf("\n");
  for (const auto& p : producers) {
    const auto ms = timeInterleaved({[&] {
                                       for (int i = 0; i < n; ++i)
                                         p.step();
                                     },
                                     [&] {
                                       for (int i = 0; i < n; ++i) {
                                         (void)contiguousFast(act);
                                         p.step();
                                       }
                                     },
                                     [&] {
                                       std::vector<AsyncHandle> hs;
                                       for (int i = 0; i < n; ++i) {
                                         hs.push_back(contiguousAsync(act));
                                         p.step();
                                       }
                                       for (auto& h : hs)
                                         (void)h.wait();
                                     }},
                                    30);
    const double conv = ms[1] - ms[0], hidden = ms[1] - ms[2];
    std::printf("overlap, %s: %d steps %.3f ms; with %d sync conversions %.3f ms; async %.3f ms: "
                "%.3f of %.3f ms of conversion hidden (%.0f%%), async %.2fx sync\n",
                p.name, n, ms[0], n, ms[1], ms[2], hidden, conv,
                conv > 0 ? 100.0 * hidden / conv : 0.0, ms[1] / ms[2]);
  }
  return 0;
}
