// The facts of one site, measured and priced once, as the per-site rules read them
// (rules/rule.h): each consumer classified and weighed, the conversion priced by the cost model,
// the noise margin; and the statistics they rest on. decide_sites.cpp hands them to the rules.
#pragma once

#include "xalloc/costfit/cost_model.h"
#include "xalloc/formats/profile.h"
#include "xalloc/scheduler/decide.h"

#include "rules/rule.h"

namespace xalloc::scheduler {

/// The smallest gain worth an edit: an absolute floor, and a fraction of the model's time (for
/// the sites and the region decisions alike).
double gainFloor(const formats::Profile& p, const SchedOptions& o);

class SiteFacts {
public:
  SiteFacts(const formats::Profile& p, const formats::Cost& c, const SchedOptions& o)
      : p_(p), predictor_(c), o_(o), floor_ms_(gainFloor(p, o)) {}

  /// The facts the sync rules read: each consumer classified and weighed, the conversion priced.
  rules::SyncSite syncFacts(const formats::Record& r, const formats::Op& producer) const;
  /// The facts the remove rules read: the conversion's input and what its consumers take
  /// without it.
  rules::RemoveSite removeFacts(const formats::Record& r, const formats::Op& conv) const;
  /// The facts the keep rules read: a kept conversion's fused producer, measured.
  rules::Kept keptFacts(const rules::RemoveSite& s, const formats::Decision& kept) const;

private:
  double se(double iqr) const;
  static double sq(double x) { return x * x; }
  double marginFor(double var, double traded_ms) const;
  std::pair<double, double> layoutChange(const formats::ConsumerTiming& c, double other_ms,
                                         const std::optional<double>& other_spread) const;
  double runsOf(std::int64_t op_id) const;
  double weightedRuns(const formats::Record& r, std::int64_t op_id, std::int64_t producer_id) const;
  double readsOf(const formats::Record& r, const formats::ConsumerTiming& c,
                 std::int64_t producer) const;
  struct After {
    double delta = 0, var = 0, as_is_ms = 0;
    double in_run_ms = 0; // the followed ops' own time in the model's run
  };
  std::optional<After> followed(const formats::ConsumerTiming& c) const;

  const formats::Profile& p_;
  costfit::CostPredictor predictor_;
  SchedOptions o_;
  double floor_ms_;
};

} // namespace xalloc::scheduler
