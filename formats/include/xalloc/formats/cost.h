// cost.json: the fitted conversion cost model and the measurements it was fitted on.
#pragma once

#include "xalloc/formats/types.h"

namespace xalloc::formats {

inline constexpr const char* kCostSchema = "xalloc.cost";
inline constexpr std::int64_t kCostVersion = 1;

/// Accuracy of a model on samples it was not fitted on (k-fold cross-validation by layout).
/// The error over the layouts of one size band: from_bytes <= bytes < to_bytes (no to_bytes:
/// unbounded).
struct SizeBandError {
  std::int64_t from_bytes = 0;
  std::optional<std::int64_t> to_bytes;
  std::int64_t samples = 0;
  double mape = 0; // in percent
};

struct FitQuality {
  std::int64_t folds = 0;
  std::int64_t samples = 0;
  double mape = 0;                    // mean absolute percentage error, in percent
  double median_ape = 0;              // in percent
  double max_ape = 0;                 // in percent
  std::optional<double> kendall_tau;  // rank agreement of predicted and measured times
  std::vector<SizeBandError> by_size; // bands with samples: below 64 KiB, 1 MiB, 32 MiB, above
};

/// cost_ms ~= alpha * numel + beta * ndim + gamma, for one device and dtype group.
struct CostModelEntry {
  std::string device = "cpu";
  std::string dtype_group; // element size class: "1-byte", "2-byte", "4-byte", "8-byte"
  /// The conversions it predicts: those to this layout (row-major unless said otherwise).
  LayoutTarget target = LayoutTarget::Contiguous;
  double alpha = 0;
  double beta = 0;
  double gamma = 0;
  std::int64_t n_samples = 0;
  double r2 = 0;
  std::string fit = "least_squares"; // or "median_rate" (fallback when too few distinct layouts)
  double floor_gbps = 0;             // predictions never beat bytes / this bandwidth
  std::optional<FitQuality> holdout;
};

/// The stride-aware model of one device: per copy-kernel path, non-negative coefficients over
/// layout features (see costfit/stride.h), fitted for relative error.
struct StridePath {
  std::string path; // "transpose2d", "vectorized", "broadcast", "strided", or "any" (pooled)
  std::vector<double> coefficients; // one per feature, in StrideModel::features order
  std::int64_t n_samples = 0;
};

struct StrideModel {
  std::string device = "cpu";
  CacheInfo caches;                  // the cache sizes the features were computed with
  double floor_gbps = 0;             // predictions never beat bytes / this bandwidth
  std::vector<std::string> features; // names, in coefficient order
  std::vector<StridePath> paths;
  std::optional<FitQuality> holdout;         // k-fold by layout
  std::optional<FitQuality> classic_holdout; // the classic model on the same folds
  std::optional<FitQuality> test;            // on an independent profile (xcost --test)
  std::optional<FitQuality> classic_test;
};

struct Cost {
  std::string tool_version;
  ModelInfo model; // the model whose profile the fit came from
  std::vector<ConversionCost> conversion_cost_table;
  std::vector<CostModelEntry> cost_model;
  std::vector<StrideModel> stride_model;
};

/// "4-byte" for float32 etc.
std::string dtypeGroup(const std::string& dtype);

nlohmann::json toJson(const Cost& c);
Cost readCost(const JsonReader& r);

} // namespace xalloc::formats
