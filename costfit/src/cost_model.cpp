// Least-squares fit of the classic model, k-fold validation, and table-or-model prediction.
#include "xalloc/costfit/cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include <Eigen/Dense>

#include "xalloc/costfit/stride.h"
#include "xalloc/error.h"

namespace xalloc::costfit {

using formats::CostModelEntry;
using formats::Layout;

namespace {

double median(std::vector<double> v) {
  XALLOC_EXPECTS(!v.empty(), "median of nothing");
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Solves least squares on the chosen columns (numel, ndim, 1). Columns are scaled to unit norm
// first: numel is ~1e6 where ndim is ~4, and QR's rank decision needs comparable columns.
bool solve(const std::vector<Sample>& s, bool use_ndim, CostModelEntry& e) {
  const int cols = use_ndim ? 3 : 2;
  const auto n = static_cast<Eigen::Index>(s.size());
  if (n < cols)
    return false;
  Eigen::MatrixXd A(n, cols);
  Eigen::VectorXd b(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& smp = s[static_cast<std::size_t>(i)];
    A(i, 0) = static_cast<double>(smp.layout.numel());
    if (use_ndim)
      A(i, 1) = static_cast<double>(smp.layout.ndim());
    A(i, cols - 1) = 1.0;
    b(i) = smp.ms;
  }
  Eigen::VectorXd scale = A.colwise().norm().transpose();
  for (int c = 0; c < cols; ++c)
    if (scale(c) == 0)
      return false;
  Eigen::MatrixXd As = A * scale.cwiseInverse().asDiagonal();
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(As);
  qr.setThreshold(1e-10);
  if (qr.rank() < cols)
    return false;
  Eigen::VectorXd x = qr.solve(b).cwiseQuotient(scale);
  e.alpha = x(0);
  e.beta = use_ndim ? x(1) : 0.0;
  e.gamma = x(cols - 1);
  e.fit = "least_squares";
  return true;
}

// The fitted line itself, without the bandwidth floor.
double rawClassic(const CostModelEntry& e, const Layout& layout) {
  return e.alpha * static_cast<double>(layout.numel()) +
         e.beta * static_cast<double>(layout.ndim()) + e.gamma;
}

double rSquared(const std::vector<Sample>& s, const CostModelEntry& e) {
  double mean = 0;
  for (const auto& x : s)
    mean += x.ms;
  mean /= static_cast<double>(s.size());
  double ss_tot = 0, ss_res = 0;
  for (const auto& x : s) {
    const double raw = rawClassic(e, x.layout);
    ss_res += (x.ms - raw) * (x.ms - raw);
    ss_tot += (x.ms - mean) * (x.ms - mean);
  }
  return ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res == 0 ? 1.0 : 0.0);
}

} // namespace

CostModelEntry fitClassic(const std::vector<Sample>& samples, const std::string& device,
                          const std::string& dtype_group, double floor_gbps) {
  XALLOC_EXPECTS(!samples.empty(), "fitClassic needs at least one sample");
  CostModelEntry e;
  e.device = device;
  e.dtype_group = dtype_group;
  e.n_samples = static_cast<std::int64_t>(samples.size());
  e.floor_gbps = floor_gbps;
  if (!solve(samples, true, e) && !solve(samples, false, e)) {
    // Too few distinct layouts for a line: a median time per element (or, when every layout is
    // empty, a median fixed cost).
    std::vector<double> rates, times;
    for (const auto& s : samples) {
      times.push_back(s.ms);
      if (s.layout.numel() > 0)
        rates.push_back(s.ms / static_cast<double>(s.layout.numel()));
    }
    e.alpha = rates.empty() ? 0.0 : median(rates);
    e.beta = 0;
    e.gamma = rates.empty() ? median(times) : 0.0;
    e.fit = "median_rate";
  }
  e.r2 = rSquared(samples, e);
  return e;
}

double predictClassic(const CostModelEntry& e, const Layout& layout) {
  const double raw = rawClassic(e, layout);
  double floor_ms = 0;
  if (e.floor_gbps > 0)
    floor_ms = static_cast<double>(layout.bytes()) / (e.floor_gbps * 1e9) * 1e3;
  return std::max({raw, floor_ms, 0.0});
}

std::vector<Fold> foldsByLayout(const std::vector<Sample>& samples, int folds) {
  const std::size_t n = samples.size();
  if (n < 3 || folds < 2)
    return {};
  const std::size_t k = std::min<std::size_t>(static_cast<std::size_t>(folds), n);
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return samples[a].layout.key() < samples[b].layout.key();
  });
  std::vector<Fold> out(k);
  for (std::size_t f = 0; f < k; ++f)
    for (std::size_t i = 0; i < n; ++i)
      (i % k == f ? (void)out[f].test.push_back(&samples[order[i]])
                  : (void)out[f].train.push_back(samples[order[i]]));
  return out;
}

std::optional<formats::FitQuality> crossValidateClassic(const std::vector<Sample>& samples,
                                                        int folds, double floor_gbps) {
  const std::vector<Fold> split = foldsByLayout(samples, folds);
  std::vector<double> apes;
  for (const Fold& fold : split) {
    CostModelEntry e = fitClassic(fold.train, "", "", floor_gbps);
    for (const Sample* t : fold.test)
      if (t->ms > 0)
        apes.push_back(std::abs(predictClassic(e, t->layout) - t->ms) / t->ms * 100.0);
  }
  if (apes.empty())
    return std::nullopt;
  formats::FitQuality q;
  q.folds = static_cast<std::int64_t>(split.size());
  q.samples = static_cast<std::int64_t>(apes.size());
  q.mape = std::accumulate(apes.begin(), apes.end(), 0.0) / static_cast<double>(apes.size());
  q.median_ape = median(apes);
  q.max_ape = *std::max_element(apes.begin(), apes.end());
  return q;
}

formats::Cost fitCost(const formats::Profile& profile, const FitOptions& options) {
  formats::Cost cost;
  cost.model = profile.model;
  cost.conversion_cost_table = profile.conversion_cost_table;
  // The profile's layouts, then the extra ones it does not have.
  std::vector<const formats::ConversionCost*> measured;
  std::set<std::string> seen;
  for (const auto* table : {&profile.conversion_cost_table, &options.also})
    for (const auto& c : *table)
      if (seen.insert(c.key()).second)
        measured.push_back(&c);
  // The classic model per device, dtype group and target layout: a conversion to channels-last
  // writes its output in another order than one to row-major, so each is fitted and scored on
  // its own conversions.
  std::map<std::tuple<std::string, std::string, formats::LayoutTarget>, std::vector<Sample>> groups;
  for (const auto* c : measured)
    groups[{c->layout.device, formats::dtypeGroup(c->layout.dtype), c->target}].push_back(
        {c->layout, c->median_ms});
  for (const auto& [key, samples] : groups) {
    const auto& [device, group, target] = key;
    double floor_gbps = device == profile.device.type ? profile.device.copy_bandwidth_gbps : 0;
    CostModelEntry e = fitClassic(samples, device, group, floor_gbps);
    e.target = target;
    e.holdout = crossValidateClassic(samples, options.folds, floor_gbps);
    cost.cost_model.push_back(std::move(e));
  }
  // The stride-aware model: one per device, over every dtype, of conversions to row-major (its
  // features describe reading a layout into row-major order).
  std::map<std::string, std::vector<Sample>> by_device;
  for (const auto* c : measured)
    if (c->target == formats::LayoutTarget::Contiguous)
      by_device[c->layout.device].push_back({c->layout, c->median_ms});
  for (const auto& [device, samples] : by_device) {
    const bool ours = device == profile.device.type;
    const double floor_gbps = ours ? profile.device.copy_bandwidth_gbps : 0;
    const formats::CacheInfo caches = ours ? profile.device.caches : formats::CacheInfo{};
    auto m = fitStride(samples, device, caches, floor_gbps);
    if (!m)
      continue;
    if (auto cv = crossValidateStride(samples, caches, floor_gbps, options.folds)) {
      m->holdout = cv->first;
      m->classic_holdout = cv->second;
    }
    cost.stride_model.push_back(std::move(*m));
  }
  return cost;
}

void testCost(formats::Cost& cost, const formats::Profile& independent) {
  for (auto& m : cost.stride_model) {
    std::vector<double> stride, classic, measured;
    std::vector<std::int64_t> bytes;
    for (const auto& c : independent.conversion_cost_table) {
      if (c.layout.device != m.device || !(c.median_ms > 0) ||
          c.target != formats::LayoutTarget::Contiguous)
        continue;
      const formats::CostModelEntry* e = nullptr;
      for (const auto& entry : cost.cost_model)
        if (entry.device == m.device && entry.target == formats::LayoutTarget::Contiguous &&
            entry.dtype_group == formats::dtypeGroup(c.layout.dtype))
          e = &entry;
      if (!e)
        continue;
      measured.push_back(c.median_ms);
      bytes.push_back(c.layout.bytes());
      stride.push_back(predictStride(m, c.layout));
      classic.push_back(predictClassic(*e, c.layout));
    }
    if (measured.empty())
      continue;
    m.test = quality(stride, measured, 0, bytes);
    m.classic_test = quality(classic, measured, 0, bytes);
  }
}

CostPredictor::CostPredictor(const formats::Cost& cost) : cost_(cost) {
  for (const auto& c : cost_.conversion_cost_table)
    measured_.emplace(c.key(), &c);
}

std::optional<CostPredictor::Prediction>
CostPredictor::predict(const Layout& layout, formats::LayoutTarget target) const {
  formats::ConversionCost probe;
  probe.layout = layout;
  probe.target = target;
  if (auto it = measured_.find(probe.key()); it != measured_.end()) {
    const formats::ConversionCost& c = *it->second;
    return Prediction{c.median_ms, c.spread_ms, "measured", c.allocation_ms,
                      c.allocation_spread_ms.value_or(0)};
  }
  if (target == formats::LayoutTarget::Contiguous)
    for (const auto& m : cost_.stride_model)
      if (m.device == layout.device)
        return Prediction{predictStride(m, layout), 0.0, "stride", std::nullopt, 0};
  const std::string group = formats::dtypeGroup(layout.dtype);
  for (const auto& e : cost_.cost_model)
    if (e.device == layout.device && e.dtype_group == group && e.target == target)
      return Prediction{predictClassic(e, layout), 0.0, "classic", std::nullopt, 0};
  return std::nullopt;
}

} // namespace xalloc::costfit
