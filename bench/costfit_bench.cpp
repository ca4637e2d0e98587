// The stride-aware cost model's speed (issue goals: fit 10k samples <= 10 ms, one prediction
// <= 1 us, the model <= 300 KB in cost.json). Layouts are random permutations of random shapes
// in four dtypes; their times come from a model of the same features with 5% noise (the speed
// does not depend on the times).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "xalloc/costfit/random_layouts.h"
#include "xalloc/costfit/stride.h"

using namespace xalloc;
using namespace xalloc::costfit;

namespace {

template <typename F> double bestMs(int reps, F&& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(
        best,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}
} // namespace

int main() {
  formats::CacheInfo caches;
  caches.l1d_bytes = 48 << 10;
  caches.l2_bytes = 1 << 20;
  caches.l3_bytes = 32 << 20;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(1.0, 0.05);
  std::array<double, kStrideFeatures> truth{};
  truth[0] = 3e-4;
  truth[2] = 1e-6;
  truth[7] = 2e-8;
  truth[14] = 5e-6;
  std::vector<Sample> samples;
  for (int i = 0; i < 10000; ++i) {
    formats::Layout l =
        randomPermutedLayout(rng, {"float32", "float64", "float16", "uint8"}, 5, 300);
    const auto f = strideFeatures(l, caches).x;
    samples.push_back({l, std::inner_product(f.begin(), f.end(), truth.begin(), 0.0) * noise(rng)});
  }
  std::optional<formats::StrideModel> model;
  const double fit_ms = bestMs(5, [&] { model = fitStride(samples, "cpu", caches, 20.0); });
  std::vector<double> sink(samples.size());
  const double predict_ms = bestMs(5, [&] {
    for (std::size_t i = 0; i < samples.size(); ++i)
      sink[i] = predictStride(*model, samples[i].layout);
  });
  const std::size_t json_bytes =
      formats::toJson(formats::Cost{"", {}, {}, {}, {*model}}).dump().size();
  std::printf("stride model: fit 10k samples %.2f ms (goal <= 10), one prediction %.0f ns "
              "(goal <= 1000), model in cost.json %.1f KB (goal <= 300), %zu paths\n",
              fit_ms, predict_ms * 1e6 / static_cast<double>(samples.size()),
              static_cast<double>(json_bytes) / 1024.0, model->paths.size());
  return 0;
}
