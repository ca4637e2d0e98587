// measureConversionCost: paired, placement-spread timings of one layout's conversion.
#include "xalloc/profiler/conversion_cost.h"

#include <algorithm>
#include <optional>
#include <vector>

#include <ATen/ATen.h>

#include "xalloc/profiler/signature.h"
#include "xalloc/torch_compat.h"

namespace xalloc::profiler {

namespace {
constexpr int kRounds = 3; // placements of the source

std::string costKey(const at::Tensor& tensor, int warmup, int repeats, const char* how,
                    formats::LayoutTarget target) {
  const std::string to = target == formats::LayoutTarget::Contiguous
                             ? ""
                             : std::string("|to:") + formats::toString(target);
  return "copy|" + layoutSignature(tensor) + repeatsTag(warmup, repeats) + how + to;
}

struct Stored {
  TimingStats s, ref, ratio;
  std::optional<TimingStats> allocation; // fresh conversion minus reused-buffer copy, paired
};

std::optional<Stored> lookUp(TimingStore* db, const std::string& key) {
  auto hit = db ? db->getAll({key, key + "|ref", key + "|ratio"}) : std::nullopt;
  if (!hit)
    return std::nullopt;
  return Stored{(*hit)[0].stats, (*hit)[1].stats, (*hit)[2].stats, std::nullopt};
}

Stored summarizeSamples(PairedSamples p) {
  return {summarize(std::move(p.ms)), summarize(std::move(p.ref_ms)), summarize(std::move(p.ratio)),
          std::nullopt};
}

void store(TimingStore* db, const std::string& key, const Stored& st) {
  if (!db)
    return;
  db->put(key, {st.s, 0});
  db->put(key + "|ref", {st.ref, 0});
  db->put(key + "|ratio", {st.ratio, 0});
}

formats::ConversionCost costOf(formats::Layout layout, const Stored& st, const std::string& source,
                               formats::LayoutTarget target) {
  formats::ConversionCost c;
  c.layout = std::move(layout);
  c.target = target;
  c.samples_ms = st.s.samples_ms;
  c.median_ms = st.s.median_ms;
  c.spread_ms = st.s.iqr_ms;
  c.reference_ms = st.ref.median_ms;
  c.ratio = st.ratio.median_ms;
  c.ratio_spread = st.ratio.iqr_ms;
  c.noisy = isNoisy(st.s);
  c.source = source;
  if (st.allocation) {
    c.allocation_ms = std::max(0.0, st.allocation->median_ms);
    c.allocation_spread_ms = st.allocation->iqr_ms;
  }
  return c;
}

// What `aten::contiguous` pays beyond the copy for its fresh output, measured in this process's
// allocator state (xprof: steadyStateMalloc): pairs of a conversion into a fresh tensor, freed
// right after as a consumer frees it, and a copy into a buffer kept across the pairs.
TimingStats measureAllocation(const at::Tensor& src, int repeats, c10::MemoryFormat format) {
  at::Tensor out = at::empty(src.sizes(), src.options().memory_format(format));
  PairedTiming m = timeInterleaved([&] { out.copy_(src); }, [&] { (void)src.contiguous(format); },
                                   1, std::max(5, repeats));
  return m.delta;
}
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

c10::MemoryFormat memoryFormatOf(formats::LayoutTarget target) {
  switch (target) {
  case formats::LayoutTarget::ChannelsLast:
    return c10::MemoryFormat::ChannelsLast;
  case formats::LayoutTarget::ChannelsLast3d:
    return c10::MemoryFormat::ChannelsLast3d;
  default:
    return c10::MemoryFormat::Contiguous;
  }
}

void measurePlacement(const at::Tensor& src, int warmup, int repeats, PairedSamples& into,
                      c10::MemoryFormat format) {
  const std::int64_t bytes = src.numel() * static_cast<std::int64_t>(src.element_size());
  at::Tensor out = at::empty(src.sizes(), src.options().memory_format(format));
  at::Tensor plain_src = at::ones({std::max<std::int64_t>(bytes, 1)}, at::kByte);
  at::Tensor plain_out = at::empty_like(plain_src);
  PairedTiming m = timeInterleaved([&] { out.copy_(src); }, [&] { plain_out.copy_(plain_src); },
                                   std::max(warmup, 1), std::max(1, repeats));
  for (std::size_t i = 0; i < m.a.samples_ms.size(); ++i) {
    into.ms.push_back(m.a.samples_ms[i]);
    into.ref_ms.push_back(m.b.samples_ms[i]);
    into.ratio.push_back(m.b.samples_ms[i] > 0 ? m.a.samples_ms[i] / m.b.samples_ms[i] : 1.0);
  }
}

formats::ConversionCost measureConversionCost(const at::Tensor& tensor, const std::string& source,
                                              int warmup, int repeats, TimingStore* db,
                                              formats::LayoutTarget target) {
  const c10::MemoryFormat format = memoryFormatOf(target);
  const std::string key =
      costKey(tensor, warmup, repeats, ("x" + std::to_string(kRounds)).c_str(), target);
  const int per_round = (repeats + kRounds - 1) / kRounds;
  std::optional<Stored> st = lookUp(db, key);
  if (!st) {
    PairedSamples samples;
    std::vector<at::Tensor> placed; // every round's copy stays alive: each has its own memory
    for (int round = 0; round < kRounds; ++round) {
      placed.push_back(round == 0 ? tensor : relocated(tensor));
      measurePlacement(placed.back(), warmup, per_round, samples, format);
    }
    st = summarizeSamples(std::move(samples));
    store(db, key, *st);
  }
  // Stored apart, so that a database from before it was measured still serves the copy.
  if (auto hit = db ? db->get(key + "|alloc") : std::nullopt) {
    st->allocation = hit->stats;
  } else {
    st->allocation = measureAllocation(tensor, per_round, format);
    if (db)
      db->put(key + "|alloc", {*st->allocation, 0});
  }
  return costOf(layoutOf(tensor), *st, source, target);
}

std::vector<formats::ConversionCost>
measureInPasses(std::size_t count, const std::function<at::Tensor(std::size_t)>& materialize,
                const PassOptions& o, TimingStore* db) {
  struct Entry {
    formats::Layout layout;
    std::string key;
    int repeats = 0;
    std::optional<Stored> stored;
    PairedSamples samples;
  };
  std::vector<std::optional<Entry>> entries(count); // nullopt: not wanted
  const int passes = std::max(o.passes, 1);
  std::size_t done = 0;
  auto tick = [&] {
    if (o.tick)
      o.tick(done);
  };
  // A layout left out or found in the database counts as all its passes done at once.
  auto skipAll = [&] {
    done += static_cast<std::size_t>(passes);
    tick();
  };
  for (int pass = 0; pass < passes; ++pass) {
    for (std::size_t i = 0; i < count; ++i) {
      if (pass > 0 && (!entries[i] || entries[i]->stored))
        continue;
      // A fresh tensor each pass: another placement, measured at another moment.
      const at::Tensor t = materialize(i);
      if (pass == 0) {
        formats::Layout l = layoutOf(t);
        if (o.wanted && !o.wanted(l)) {
          skipAll();
          continue;
        }
        const auto [warmup, repeats] = o.counts ? o.counts(t) : std::pair<int, int>{3, 15};
        Entry e;
        e.layout = std::move(l);
        e.key = costKey(t, warmup, repeats, ("p" + std::to_string(passes)).c_str(), o.target);
        e.repeats = std::max(1, (repeats + passes - 1) / passes);
        e.stored = lookUp(db, e.key);
        entries[i] = std::move(e);
        if (entries[i]->stored) {
          skipAll();
          continue;
        }
        measurePlacement(t, warmup, entries[i]->repeats, entries[i]->samples,
                         memoryFormatOf(o.target));
      } else {
        measurePlacement(t, 1, entries[i]->repeats, entries[i]->samples, memoryFormatOf(o.target));
      }
      if (pass + 1 == passes) {
        entries[i]->stored = summarizeSamples(std::move(entries[i]->samples));
        store(db, entries[i]->key, *entries[i]->stored);
      }
      ++done;
      tick();
    }
  }
  std::vector<formats::ConversionCost> out;
  for (auto& e : entries)
    if (e)
      out.push_back(costOf(e->layout, *e->stored, o.source, o.target));
  return out;
}

} // namespace xalloc::profiler
