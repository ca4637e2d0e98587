// The stride-aware conversion cost model. A `.contiguous()` on CPU runs one of four kernels
// (PyTorch 1.13 `copy_`): a blocked 2-D transpose (a 2-D tensor with strides (1, rows), at least
// 3600 elements), a vectorized loop when the innermost source stride is 1 (not for float16,
// which is always copied element by element), a broadcast loop when it is 0, and a strided
// element-by-element loop otherwise. Each path gets its own non-negative linear model over
// features computed from sizes and strides alone:
//
//   fixed                 1 per call
//   blocks, rows          outer-loop iterations (rows of the innermost merged dimension, and
//                         2-D blocks of the two innermost) after merging dimensions that are
//                         contiguous in both source and destination
//   numel1/2/4/8          elements, by element size
//   bytes                 bytes written
//   ramp_L2, ramp_L3      bytes written, times the share that spills from L2 / L3: what must
//                         stay cached from one conversion to the next (source lines, output,
//                         and the paired plain copy timed in between) against the cache, rising
//                         with log2 from 0 at half the cache to 1 at the whole cache
//   m1, m2_*, m3_*        cache lines the source reads miss in L1/L2/L3 (loop-nest footprint
//                         model: the outermost loop level whose footprint fits in the cache
//                         carries reuse; outside it every distinct line is fetched again),
//                         split into streamed misses (the innermost dimension walks through
//                         whole lines in small steps: prefetched) and jumps
//   t1_*, t2_*            pages missed in the first- and second-level TLB (the same model with
//                         4 KiB pages and 64 / 2048 entries), streamed or jumps
//   elem_bytes_scalar     bytes copied element by element (the strided path)
//
// Fitted for relative error (each sample weighs 1/time, so 4 KB and 1 GB layouts count the
// same) by non-negative least squares; predictions never go below bytes / copy bandwidth.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "xalloc/costfit/cost_model.h"
#include "xalloc/formats/cost.h"

namespace xalloc::costfit {

enum class CopyPath { Transpose2d, Vectorized, Broadcast, Strided };
const char* copyPathName(CopyPath p);

inline constexpr int kStrideFeatures = 20;
extern const std::array<const char*, kStrideFeatures> kStrideFeatureNames;

struct StrideFeatures {
  CopyPath path = CopyPath::Strided;
  std::array<double, kStrideFeatures> x{};
};

/// Features of a layout for the given caches. Negative strides count by their magnitude; a
/// layout with no elements has only the fixed cost.
StrideFeatures strideFeatures(const formats::Layout& layout, const formats::CacheInfo& caches);

/// Non-negative least squares, min |A x - b| with x >= 0 (Lawson-Hanson on the normal
/// equations). Columns that are all zero get 0.
std::vector<double> nnls(const std::vector<std::array<double, kStrideFeatures>>& rows,
                         const std::vector<double>& b);

/// Fits one device's model: a model per path with at least 12 samples, and a pooled "any"
/// model used for the other paths. nullopt when no sample has a positive time.
std::optional<formats::StrideModel> fitStride(const std::vector<Sample>& samples,
                                              const std::string& device,
                                              const formats::CacheInfo& caches, double floor_gbps);

double predictStride(const formats::StrideModel& m, const formats::Layout& layout);

/// Drops the stride models fitted on other features than this xcost computes (a cost.json from
/// an older xcost, whose coefficients would weigh the wrong columns); predictions then fall back
/// to the classic model. True when any was dropped (kStaleStrideModel says so to the user).
bool dropStaleStrideModels(formats::Cost& cost);
inline constexpr const char* kStaleStrideModel =
    "the stride model was fitted on other features (an older xcost); predicting with the "
    "classic model: fit again with xcost";

/// Accuracy of predictions against measured times (APE in percent, Kendall's tau-b).
formats::FitQuality quality(const std::vector<double>& predicted,
                            const std::vector<double>& measured, int folds,
                            const std::vector<std::int64_t>& bytes = {});

/// k-fold cross-validation by layout of the stride model and, on the same folds, of the
/// classic model (per dtype group). nullopt with fewer than 3 samples.
std::optional<std::pair<formats::FitQuality, formats::FitQuality>>
crossValidateStride(const std::vector<Sample>& samples, const formats::CacheInfo& caches,
                    double floor_gbps, int folds);

} // namespace xalloc::costfit
