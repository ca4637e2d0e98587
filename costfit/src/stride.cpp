// The stride-aware model: features from sizes and strides, NNLS for relative error, k-fold
// validation against the classic model.
#include "xalloc/costfit/stride.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>

#include <Eigen/Dense>

#include "xalloc/error.h"

namespace xalloc::costfit {

using formats::Layout;

const std::array<const char*, kStrideFeatures> kStrideFeatureNames = {
    "fixed",   "blocks",  "rows",    "numel1", "numel2",  "numel4",           "numel8",
    "bytes",   "ramp_L2", "ramp_L3", "m1",     "m2_seq",  "m2_rand",          "m3_seq",
    "m3_rand", "t1_seq",  "t1_rand", "t2_seq", "t2_rand", "elem_bytes_scalar"};

const char* copyPathName(CopyPath p) {
  switch (p) {
  case CopyPath::Transpose2d:
    return "transpose2d";
  case CopyPath::Vectorized:
    return "vectorized";
  case CopyPath::Broadcast:
    return "broadcast";
  case CopyPath::Strided:
    return "strided";
  }
  return "strided";
}

namespace {

struct Dim {
  double size;
  double stride; // in elements, non-negative
};

constexpr int kMaxDims = 16;

// A loop nest, outermost first, in a fixed array: features are computed per prediction, so
// nothing here allocates.
struct Nest {
  std::array<Dim, kMaxDims> d{};
  int n = 0;
  void push(Dim x) {
    if (n < kMaxDims)
      d[static_cast<std::size_t>(n++)] = x;
  }
  const Dim& back() const { return d[static_cast<std::size_t>(n - 1)]; }
  Dim& back() { return d[static_cast<std::size_t>(n - 1)]; }
};

// Distinct units (cache lines or pages of `unit` bytes) the loop levels from..n-1 touch.
double footprint(const Nest& m, int from, double item, double unit) {
  std::array<std::pair<double, double>, kMaxDims> sorted{}; // (stride bytes, size)
  std::size_t k = 0;
  for (int j = from; j < m.n; ++j) {
    const Dim& x = m.d[static_cast<std::size_t>(j)];
    if (x.stride != 0 && x.size > 1)
      sorted[k++] = {x.stride * item, x.size};
  }
  std::sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k));
  double run = item, count = 1;
  for (std::size_t i = 0; i < k; ++i) {
    const auto [sb, sz] = sorted[i];
    if (sb < unit || sb <= run)
      run = sb * (sz - 1) + run; // neighbours share units: the run grows
    else
      count *= sz; // separate runs
  }
  const double per_run = std::ceil(run / unit - 1e-9) + (std::fmod(run, unit) != 0 ? 0.5 : 0.0);
  return count * std::max(1.0, per_run);
}

// Footprints of every suffix of the nest for one unit size: f[j] for levels j..n-1, f[n] = 1.
struct Footprints {
  std::array<double, kMaxDims + 1> f{};
  Footprints(const Nest& m, double item, double unit) {
    for (int j = 0; j < m.n; ++j)
      f[static_cast<std::size_t>(j)] = footprint(m, j, item, unit);
    f[static_cast<std::size_t>(m.n)] = 1;
  }
};

// Units missed by a cache of `cap` units: the outermost level whose footprint fits carries
// reuse; the level just outside it re-fetches its footprint once per outer iteration.
double misses(const Nest& m, const Footprints& fp, double cap, bool whole_fits) {
  if (whole_fits)
    return 0;
  int js = m.n;
  for (int j = 0; j <= m.n; ++j)
    if (fp.f[static_cast<std::size_t>(j)] <= cap) {
      js = j;
      break;
    }
  if (js == 0)
    return fp.f[0];
  double outer = 1;
  for (int k = 0; k + 1 < js; ++k)
    outer *= m.d[static_cast<std::size_t>(k)].size;
  return fp.f[static_cast<std::size_t>(js - 1)] * outer;
}

} // namespace

StrideFeatures strideFeatures(const Layout& layout, const formats::CacheInfo& caches) {
  StrideFeatures out;
  auto& x = out.x;
  x[0] = 1.0;
  const double item =
      static_cast<double>(std::max<std::int64_t>(formats::dtypeSize(layout.dtype), 1));
  const double numel = static_cast<double>(layout.numel());
  if (numel <= 0)
    return out;
  // Merge dimensions contiguous with each other in the source (the destination is row-major).
  Nest m;
  for (std::size_t d = 0; d < layout.sizes.size(); ++d) {
    const double s = static_cast<double>(layout.sizes[d]);
    const double st =
        std::abs(static_cast<double>(d < layout.strides.size() ? layout.strides[d] : 0));
    if (s == 1)
      continue;
    if (m.n > 0 && m.back().stride == st * s)
      m.back() = {m.back().size * s, st};
    else
      m.push({s, st});
  }
  if (m.n == 0)
    m.push({1, 1});
  const bool is_t2d = layout.sizes.size() == 2 && layout.strides.size() == 2 &&
                      layout.strides[0] == 1 && layout.strides[1] == layout.sizes[0] &&
                      numel >= 3600;
  const Dim inner = m.back();
  if (is_t2d)
    out.path = CopyPath::Transpose2d;
  else if (inner.stride == 0)
    out.path = CopyPath::Broadcast;
  else if (inner.stride == 1 && layout.dtype != "float16")
    out.path = CopyPath::Vectorized;
  else
    out.path = CopyPath::Strided;
  if (is_t2d) { // blocks of 60 (120 for bytes): columns memcpy'd from the source
    const double rows = static_cast<double>(layout.sizes[0]);
    const double cols = static_cast<double>(layout.sizes[1]);
    const double bs = item == 1 ? 120 : 60;
    m = Nest{};
    m.push({std::ceil(rows / bs), bs});
    m.push({cols, rows});
    m.push({std::min(rows, bs), 1});
  }
  const double n_in = m.back().size;
  const double rows = numel / n_in;
  const double blocks = rows / (m.n > 1 ? m.d[static_cast<std::size_t>(m.n - 2)].size : 1.0);
  const double bytes = numel * item;
  const Footprints lines(m, item, 64), pages(m, item, 4096);
  const double src = lines.f[0] * 64;
  x[1] = blocks;
  x[2] = rows;
  x[3] = item == 1 ? numel : 0;
  x[4] = item == 2 ? numel : 0;
  x[5] = item == 4 ? numel : 0;
  x[6] = item == 8 ? numel : 0;
  x[7] = bytes;
  const double l1 = static_cast<double>(caches.l1d_bytes > 0 ? caches.l1d_bytes : 32768);
  const double l2 = static_cast<double>(caches.l2_bytes > 0 ? caches.l2_bytes : 1 << 20);
  const double l3 = static_cast<double>(caches.l3_bytes > 0 ? caches.l3_bytes : 32 << 20);
  // What stays cached from one conversion to the next: its source lines and its output, and
  // whatever else ran in between. In the profiler's measurement that is the paired plain copy
  // (source and destination of `bytes` each, timed between two conversions); in a model, the
  // ops around the conversion. Counting it moved held-out MAPE from 22% to 19.5% (seeds 0/1/2).
  const double ws = src + 3 * bytes;
  // The share of the bytes that spills out of a cache rises with log2 of the working set from
  // half the cache (0) to the whole cache (1), not as a step at its size: replacement is not
  // perfect LRU and the other data in between is not all ours. Against a step, held-out MAPE
  // fell 17.8 -> 16.9% (seed 0 -> 1), 16.1 -> 15.2% (seeds 0 + 2 -> 1), 18.6 -> 17.5% (1 -> 0),
  // all from layouts between 1 and 32 MiB.
  auto ramp = [&](double cap) {
    return ws > cap / 2 ? std::min(1.0, std::log2(ws / cap * 2)) : 0.0;
  };
  x[8] = bytes * ramp(l2);
  x[9] = bytes * ramp(l3);
  // Misses of a stream the prefetchers follow (the innermost dimension walks through whole
  // lines or pages with small steps) cost less than misses of jumps; they get their own columns.
  auto streamed = [&](double unit) {
    const Dim& d = m.back();
    return d.stride * item < unit && d.size * d.stride * item >= unit;
  };
  x[10] = misses(m, lines, l1 / 64 * 0.75, ws <= l1);
  const double m2 = misses(m, lines, l2 / 64 * 0.75, ws <= l2);
  const double m3 = misses(m, lines, l3 / 64 * 0.75, ws <= l3);
  const double t1 = misses(m, pages, 64 * 0.75, src / 4096 <= 64 * 0.75);
  const double t2 = misses(m, pages, 2048 * 0.75, src / 4096 <= 2048 * 0.75);
  const bool line_stream = streamed(64), page_stream = streamed(4096);
  x[11] = line_stream ? m2 : 0;
  x[12] = line_stream ? 0 : m2;
  x[13] = line_stream ? m3 : 0;
  x[14] = line_stream ? 0 : m3;
  x[15] = page_stream ? t1 : 0;
  x[16] = page_stream ? 0 : t1;
  x[17] = page_stream ? t2 : 0;
  x[18] = page_stream ? 0 : t2;
  // Element-by-element copies move `item` bytes per element whatever the element size.
  x[19] = out.path == CopyPath::Strided ? bytes : 0;
  return out;
}

namespace {

constexpr int kN = kStrideFeatures;
using Gram = Eigen::Matrix<double, kN, kN>;
using Vec = Eigen::Matrix<double, kN, 1>;

// NNLS on the normal equations G = A'A, h = A'b.
std::vector<double> nnlsGram(Gram G, Vec h) {
  constexpr int n = kN;
  // Columns scaled to unit norm (features span 1 to 1e9).
  Eigen::Matrix<double, n, 1> scale;
  for (int j = 0; j < n; ++j)
    scale(j) = G(j, j) > 0 ? 1.0 / std::sqrt(G(j, j)) : 0.0;
  G = scale.asDiagonal() * G * scale.asDiagonal();
  h = scale.asDiagonal() * h;
  // Lawson-Hanson active set on min x'Gx/2 - h'x, x >= 0.
  std::array<bool, n> passive{};
  Eigen::Matrix<double, n, 1> x = Eigen::Matrix<double, n, 1>::Zero();
  for (int outer = 0; outer < 3 * n; ++outer) {
    Eigen::Matrix<double, n, 1> w = h - G * x;
    int best = -1;
    double best_w = 1e-12;
    for (int j = 0; j < n; ++j)
      if (!passive[static_cast<std::size_t>(j)] && scale(j) > 0 && w(j) > best_w) {
        best_w = w(j);
        best = j;
      }
    if (best < 0)
      break;
    passive[static_cast<std::size_t>(best)] = true;
    for (int inner = 0; inner < 3 * n; ++inner) {
      std::vector<int> idx;
      for (int j = 0; j < n; ++j)
        if (passive[static_cast<std::size_t>(j)])
          idx.push_back(j);
      const auto k = static_cast<Eigen::Index>(idx.size());
      Eigen::MatrixXd Gp(k, k);
      Eigen::VectorXd hp(k);
      for (Eigen::Index r = 0; r < k; ++r) {
        hp(r) = h(idx[static_cast<std::size_t>(r)]);
        for (Eigen::Index c = 0; c < k; ++c)
          Gp(r, c) = G(idx[static_cast<std::size_t>(r)], idx[static_cast<std::size_t>(c)]);
      }
      // Features can be exactly collinear (bytes = sum of item * numel_item): a tiny ridge on
      // the unit diagonal keeps the solve well defined without moving the fit.
      Gp.diagonal().array() += 1e-9;
      Eigen::VectorXd zp = Gp.ldlt().solve(hp);
      bool feasible = true;
      for (Eigen::Index r = 0; r < k; ++r)
        feasible &= zp(r) > 0;
      if (feasible) {
        x.setZero();
        for (Eigen::Index r = 0; r < k; ++r)
          x(idx[static_cast<std::size_t>(r)]) = zp(r);
        break;
      }
      // Step toward z until the first passive variable reaches zero; release it.
      double alpha = 1;
      for (Eigen::Index r = 0; r < k; ++r) {
        const int j = idx[static_cast<std::size_t>(r)];
        if (zp(r) <= 0 && x(j) - zp(r) > 0)
          alpha = std::min(alpha, x(j) / (x(j) - zp(r)));
      }
      for (Eigen::Index r = 0; r < k; ++r) {
        const int j = idx[static_cast<std::size_t>(r)];
        x(j) += alpha * (zp(r) - x(j));
        if (x(j) <= 1e-15) {
          x(j) = 0;
          passive[static_cast<std::size_t>(j)] = false;
        }
      }
    }
  }
  std::vector<double> out(n);
  for (int j = 0; j < n; ++j)
    out[static_cast<std::size_t>(j)] = std::max(0.0, x(j) * scale(j));
  return out;
}

constexpr std::int64_t kMinPathSamples = 12;

} // namespace

std::vector<double> nnls(const std::vector<std::array<double, kStrideFeatures>>& rows,
                         const std::vector<double>& b) {
  Gram G = Gram::Zero();
  Vec h = Vec::Zero();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Eigen::Map<const Vec> a(rows[i].data());
    G.noalias() += a * a.transpose();
    h.noalias() += a * b[i];
  }
  return nnlsGram(G, h);
}

std::optional<formats::StrideModel> fitStride(const std::vector<Sample>& samples,
                                              const std::string& device,
                                              const formats::CacheInfo& caches, double floor_gbps) {
  std::vector<const Sample*> usable;
  for (const auto& s : samples)
    if (s.ms > 0 && std::isfinite(s.ms))
      usable.push_back(&s);
  if (usable.empty())
    return std::nullopt;
  formats::StrideModel m;
  m.device = device;
  m.caches = caches;
  // The device's copy bandwidth is measured on a buffer far larger than the caches; a copy that
  // stays in cache beats it. The floor is the faster of that and of the fastest conversion
  // measured, so that no measured layout is predicted slower than the floor makes it.
  m.floor_gbps = floor_gbps;
  for (const Sample* s : usable)
    m.floor_gbps = std::max(m.floor_gbps, static_cast<double>(s->layout.bytes()) / (s->ms * 1e6));
  for (const char* name : kStrideFeatureNames)
    m.features.push_back(name);
  // One pass: each sample's features, divided by its time (relative error: residual /
  // measured, target 1), added to its path's normal equations; the pooled model sums them.
  constexpr std::size_t kPaths = 4;
  std::array<Gram, kPaths> G;
  std::array<Vec, kPaths> h;
  std::array<std::int64_t, kPaths> count{};
  for (std::size_t p = 0; p < kPaths; ++p) {
    G[p].setZero();
    h[p].setZero();
  }
  for (const Sample* s : usable) {
    const StrideFeatures f = strideFeatures(s->layout, caches);
    const auto p = static_cast<std::size_t>(f.path);
    Eigen::Map<const Vec> a(f.x.data());
    const Vec r = a / s->ms;
    G[p].noalias() += r * r.transpose();
    h[p] += r;
    ++count[p];
  }
  Gram all_G = Gram::Zero();
  Vec all_h = Vec::Zero();
  for (std::size_t p = 0; p < kPaths; ++p) {
    all_G += G[p];
    all_h += h[p];
  }
  m.paths.push_back({"any", nnlsGram(all_G, all_h), static_cast<std::int64_t>(usable.size())});
  for (std::size_t p = 0; p < kPaths; ++p)
    if (count[p] >= kMinPathSamples)
      m.paths.push_back({copyPathName(static_cast<CopyPath>(p)), nnlsGram(G[p], h[p]), count[p]});
  return m;
}

bool dropStaleStrideModels(formats::Cost& cost) {
  const std::vector<std::string> ours(kStrideFeatureNames.begin(), kStrideFeatureNames.end());
  const auto stale = [&](const formats::StrideModel& m) {
    return m.features != ours;
  };
  const auto n = std::count_if(cost.stride_model.begin(), cost.stride_model.end(), stale);
  cost.stride_model.erase(std::remove_if(cost.stride_model.begin(), cost.stride_model.end(), stale),
                          cost.stride_model.end());
  return n > 0;
}

double predictStride(const formats::StrideModel& m, const Layout& layout) {
  const StrideFeatures f = strideFeatures(layout, m.caches);
  const formats::StridePath* use = nullptr;
  const char* name = copyPathName(f.path);
  for (const auto& p : m.paths) {
    if (p.path == name) {
      use = &p;
      break;
    }
    if (p.path == "any")
      use = &p;
  }
  if (!use)
    return 0;
  double ms = 0;
  for (std::size_t k = 0; k < use->coefficients.size() && k < f.x.size(); ++k)
    ms += use->coefficients[k] * f.x[k];
  const double floor_ms =
      m.floor_gbps > 0 ? static_cast<double>(layout.bytes()) / (m.floor_gbps * 1e9) * 1e3 : 0.0;
  return std::max(ms, floor_ms);
}

formats::FitQuality quality(const std::vector<double>& predicted,
                            const std::vector<double>& measured, int folds,
                            const std::vector<std::int64_t>& bytes) {
  XALLOC_EXPECTS(predicted.size() == measured.size(), "one prediction per measurement");
  XALLOC_EXPECTS(bytes.empty() || bytes.size() == measured.size(), "one size per measurement");
  std::vector<double> apes;
  for (std::size_t i = 0; i < measured.size(); ++i)
    if (measured[i] > 0)
      apes.push_back(std::abs(predicted[i] - measured[i]) / measured[i] * 100.0);
  formats::FitQuality q;
  q.folds = folds;
  q.samples = static_cast<std::int64_t>(apes.size());
  if (apes.empty())
    return q;
  q.mape = std::accumulate(apes.begin(), apes.end(), 0.0) / static_cast<double>(apes.size());
  std::vector<double> sorted = apes;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  q.median_ape = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  q.max_ape = sorted.back();
  // Kendall's tau-b over all pairs.
  double concordant = 0, discordant = 0, ties_p = 0, ties_m = 0;
  for (std::size_t i = 0; i < measured.size(); ++i)
    for (std::size_t j = i + 1; j < measured.size(); ++j) {
      const double dp = predicted[i] - predicted[j], dm = measured[i] - measured[j];
      if (dp == 0 && dm == 0)
        continue;
      if (dp == 0)
        ++ties_p;
      else if (dm == 0)
        ++ties_m;
      else if ((dp > 0) == (dm > 0))
        ++concordant;
      else
        ++discordant;
    }
  const double denom =
      std::sqrt((concordant + discordant + ties_p) * (concordant + discordant + ties_m));
  if (denom > 0)
    q.kendall_tau = (concordant - discordant) / denom;
  // By size: the cache levels copies move through (L1/L2, L2/L3, L3, memory on most CPUs).
  constexpr std::array<std::int64_t, 3> kEdges = {std::int64_t{64} << 10, std::int64_t{1} << 20,
                                                  std::int64_t{32} << 20};
  if (!bytes.empty())
    for (std::size_t band = 0; band <= kEdges.size(); ++band) {
      formats::SizeBandError e;
      e.from_bytes = band == 0 ? 0 : kEdges[band - 1];
      if (band < kEdges.size())
        e.to_bytes = kEdges[band];
      double sum = 0;
      for (std::size_t i = 0; i < measured.size(); ++i)
        if (measured[i] > 0 && bytes[i] >= e.from_bytes &&
            (!e.to_bytes || bytes[i] < *e.to_bytes)) {
          sum += std::abs(predicted[i] - measured[i]) / measured[i] * 100.0;
          ++e.samples;
        }
      if (e.samples > 0) {
        e.mape = sum / static_cast<double>(e.samples);
        q.by_size.push_back(e);
      }
    }
  return q;
}

std::optional<std::pair<formats::FitQuality, formats::FitQuality>>
crossValidateStride(const std::vector<Sample>& samples, const formats::CacheInfo& caches,
                    double floor_gbps, int folds) {
  const std::vector<Fold> split = foldsByLayout(samples, folds);
  if (split.empty())
    return std::nullopt;
  const int k = static_cast<int>(split.size());
  std::vector<double> p_stride, p_classic, measured;
  std::vector<std::int64_t> bytes;
  for (const Fold& fold : split) {
    const std::vector<Sample>& train = fold.train;
    const std::vector<const Sample*>& test = fold.test;
    auto model = fitStride(train, "", caches, floor_gbps);
    std::map<std::string, std::vector<Sample>> groups;
    for (const auto& s : train)
      groups[formats::dtypeGroup(s.layout.dtype)].push_back(s);
    std::map<std::string, formats::CostModelEntry> classic;
    for (const auto& [g, s] : groups)
      classic[g] = fitClassic(s, "", g, floor_gbps);
    for (const Sample* t : test) {
      if (!(t->ms > 0))
        continue;
      auto c = classic.find(formats::dtypeGroup(t->layout.dtype));
      if (!model || c == classic.end())
        continue; // a dtype group only this fold has: neither model can answer
      measured.push_back(t->ms);
      bytes.push_back(t->layout.bytes());
      p_stride.push_back(predictStride(*model, t->layout));
      p_classic.push_back(predictClassic(c->second, t->layout));
    }
  }
  if (measured.empty())
    return std::nullopt;
  return std::make_pair(quality(p_stride, measured, k, bytes),
                        quality(p_classic, measured, k, bytes));
}

} // namespace xalloc::costfit
