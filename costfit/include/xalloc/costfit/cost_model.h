// The conversion cost model as xcost fits it and xsched reads it: the classic model (cost_ms ~=
// alpha * numel + beta * ndim + gamma, least squares per device and dtype group) and its held-out
// accuracy, fitCost (the classic and the stride-aware fits of stride.h, and the measured table),
// and CostPredictor, which picks the model per layout and never beats the measured copy
// bandwidth.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "xalloc/formats/cost.h"
#include "xalloc/formats/profile.h"

namespace xalloc::costfit {

/// One measured layout: its median conversion time.
struct Sample {
  formats::Layout layout;
  double ms = 0;
};

/// Fits the classic model to samples of one group. Needs at least one sample; with too few
/// distinct layouts it drops the ndim term, then falls back to a median per-element rate
/// (fit = "median_rate"). `floor_gbps` (0 = none) is stored and applied by predict().
formats::CostModelEntry fitClassic(const std::vector<Sample>& samples, const std::string& device,
                                   const std::string& dtype_group, double floor_gbps);

/// Prediction of an entry for a layout, in ms, floored at bytes / copy bandwidth.
double predictClassic(const formats::CostModelEntry& e, const formats::Layout& layout);

/// One fold of k-fold cross-validation: the samples to fit on and the held-out ones.
struct Fold {
  std::vector<Sample> train;
  std::vector<const Sample*> test;
};

/// min(folds, n) folds by layout: layouts sorted by key and dealt round-robin, so the split is
/// the same on every run. Empty with fewer than 3 samples or folds < 2.
std::vector<Fold> foldsByLayout(const std::vector<Sample>& samples, int folds);

/// k-fold cross-validation by layout (each sample is one layout). nullopt with fewer than 3.
std::optional<formats::FitQuality> crossValidateClassic(const std::vector<Sample>& samples,
                                                        int folds, double floor_gbps);

struct FitOptions {
  int folds = 5;
  /// More measured layouts to fit on, e.g. a larger calibration sweep of the same machine. They
  /// shape the models only: the cost table keeps the profile's own layouts. A layout the profile
  /// (or an earlier entry) already has is left out, so no layout sits on both sides of a fold.
  std::vector<formats::ConversionCost> also;
};

/// Fits every (device, dtype group, target layout) present in the profile's conversion cost
/// table with the classic model, and every device's row-major conversions with the stride-aware
/// model (stride.h).
formats::Cost fitCost(const formats::Profile& profile, const FitOptions& options = {});

/// Scores the cost document's models on an independent profile's measurements (its
/// conversion cost table): fills StrideModel::test and classic_test.
void testCost(formats::Cost& cost, const formats::Profile& independent);

/// Predicts conversion times from a cost document: a layout measured in the table gets its
/// median, any other the stride-aware model of its device, or else the classic model of its
/// group.
class CostPredictor {
public:
  explicit CostPredictor(const formats::Cost& cost);
  struct Prediction {
    double ms = 0;
    double spread_ms = 0;
    std::string model; // "measured", "stride" or "classic"
    /// A measured layout's fresh-output cost beyond the copy (ConversionCost::allocation_ms), and
    /// its IQR; nullopt for predictions and for layouts measured by an older xprof.
    std::optional<double> allocation_ms;
    double allocation_spread_ms = 0;
  };
  /// nullopt when neither the table nor any model covers the layout's device and dtype group.
  /// `target`: the layout the conversion makes; channels-last conversions are predicted by the
  /// classic model fitted on them (the stride-aware one knows row-major outputs only).
  std::optional<Prediction>
  predict(const formats::Layout& layout,
          formats::LayoutTarget target = formats::LayoutTarget::Contiguous) const;

private:
  const formats::Cost& cost_;
  std::map<std::string, const formats::ConversionCost*> measured_; // by layout key, first wins
};

} // namespace xalloc::costfit
