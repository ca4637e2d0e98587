// measureConversionCost: paired, placement-spread timings of one layout's conversion.
#include "xalloc/profiler/conversion_cost.h"

#include <algorithm>
#include <vector>

#include <ATen/ATen.h>

#include "xalloc/profiler/signature.h"
#include "xalloc/profiler/timing_db.h"
#include "xalloc/torch_compat.h"

namespace xalloc::profiler {

namespace {
constexpr int kRounds = 3; // placements of the source
} // namespace

formats::Layout layoutOf(const at::Tensor& t) {
  formats::Layout l;
  l.sizes = t.sizes().vec();
  l.strides = t.strides().vec();
  l.storage_offset = t.storage_offset();
  l.dtype = compat::dtypeName(t.scalar_type());
  l.device = t.device().is_cpu() ? "cpu" : t.device().str();
  return l;
}

at::Tensor relocated(const at::Tensor& t) {
  const auto n = static_cast<std::int64_t>(t.storage().nbytes() / t.element_size());
  at::Tensor storage = at::empty({n}, t.options());
  storage.copy_(t.as_strided({n}, {1}, 0)); // the whole storage, element for element
  return storage.as_strided(t.sizes(), t.strides(), t.storage_offset());
}

bool isNoisy(const TimingStats& s) {
  return s.samples_ms.size() >= 5 && s.iqr_ms > 0.25 * s.median_ms;
}

std::string repeatsTag(int warmup, int repeats) {
  return "|w" + std::to_string(warmup) + "r" + std::to_string(repeats);
}

formats::ConversionCost measureConversionCost(const at::Tensor& tensor, const std::string& source,
                                              int warmup, int repeats, TimingDb* db) {
  const std::string key = "copy|" + layoutSignature(tensor) + repeatsTag(warmup, repeats) + "x" +
                          std::to_string(kRounds);
  auto hit = db ? db->getAll({key, key + "|ref", key + "|ratio"}) : std::nullopt;
  TimingStats s, ref, ratio;
  if (hit) {
    s = (*hit)[0].stats;
    ref = (*hit)[1].stats;
    ratio = (*hit)[2].stats;
  } else {
    std::vector<double> samples, ref_samples, ratios;
    const std::int64_t bytes = tensor.numel() * static_cast<std::int64_t>(tensor.element_size());
    std::vector<at::Tensor> placed; // every round's copy stays alive: each has its own memory
    for (int round = 0; round < kRounds; ++round) {
      placed.push_back(round == 0 ? tensor : relocated(tensor));
      const at::Tensor& src = placed.back();
      at::Tensor out =
          at::empty(src.sizes(), src.options().memory_format(at::MemoryFormat::Contiguous));
      at::Tensor plain_src = at::ones({std::max<std::int64_t>(bytes, 1)}, at::kByte);
      at::Tensor plain_out = at::empty_like(plain_src);
      PairedTiming m =
          timeInterleaved([&] { out.copy_(src); }, [&] { plain_out.copy_(plain_src); },
                          std::max(warmup, 1), std::max(1, (repeats + kRounds - 1) / kRounds));
      for (std::size_t i = 0; i < m.a.samples_ms.size(); ++i) {
        samples.push_back(m.a.samples_ms[i]);
        ref_samples.push_back(m.b.samples_ms[i]);
        ratios.push_back(m.b.samples_ms[i] > 0 ? m.a.samples_ms[i] / m.b.samples_ms[i] : 1.0);
      }
    }
    s = summarize(std::move(samples));
    ref = summarize(std::move(ref_samples));
    ratio = summarize(std::move(ratios));
    if (db) {
      db->put(key, {s, 0});
      db->put(key + "|ref", {ref, 0});
      db->put(key + "|ratio", {ratio, 0});
    }
  }
  formats::ConversionCost c;
  c.layout = layoutOf(tensor);
  c.samples_ms = s.samples_ms;
  c.median_ms = s.median_ms;
  c.spread_ms = s.iqr_ms;
  c.reference_ms = ref.median_ms;
  c.ratio = ratio.median_ms;
  c.ratio_spread = ratio.iqr_ms;
  c.noisy = isNoisy(s);
  c.source = source;
  return c;
}

} // namespace xalloc::profiler
