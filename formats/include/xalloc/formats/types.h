// Types shared by the three documents: layouts, source locations and anchors, the model and
// device descriptions, ops, idle windows and measured conversion costs (their fields:
// formats/schema/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "xalloc/formats/enums.h"
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace xalloc::formats {

class JsonReader;

/// Names and element sizes of the dtypes x-allocator knows ("float32", "int64", ...).
/// Returns 0 for an unknown name.
std::int64_t dtypeSize(const std::string& dtype);

/// The memory layout of a tensor value.
struct Layout {
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  std::int64_t storage_offset = 0;
  std::string dtype = "float32";
  std::string device = "cpu";

  std::int64_t numel() const;
  std::int64_t ndim() const { return static_cast<std::int64_t>(sizes.size()); }
  std::int64_t bytes() const { return numel() * dtypeSize(dtype); }
  /// Row-major contiguity as PyTorch defines it (size-1 dimensions ignore their stride).
  bool isContiguous() const;
  /// Stable key: "float32[4,4,64,32]/[24576,32,384,1]@cpu".
  std::string key() const;
  /// The sizes as "[4,4,64,32]".
  std::string sizesText() const;
};

/// Where an op came from in the model's source ("text" is the whole source line).
struct SourceLoc {
  std::string file;
  std::int64_t line = 0;
  std::int64_t col = 0;
  std::string text;
  bool known() const { return !file.empty() && line > 0; }
  /// "model.py:47:12" in compiler style; "" when the file is unknown.
  std::string location() const;
};

/// A place in the source that survives edits above it: the enclosing function, the expression's
/// text and its ordinal among equal expressions. Line and column are hints only.
struct Anchor {
  std::string file;
  std::string function;
  std::string expr;
  std::string op; // the op kind the expression produced, e.g. "aten::transpose"
  std::int64_t ordinal = 0;
  std::int64_t line = 0;
  std::int64_t col = 0;
  /// True when file, function, expr, op and ordinal agree (line and column are ignored).
  bool sameSite(const Anchor& other) const;
  /// "model.py:47:12" in compiler style; "" when the file is unknown.
  std::string location() const;
  /// "model.py:47:12 CausalSelfAttention.forward `k.transpose(-2, -1)` #1"
  std::string describe() const;
};

/// One input of a model, generated from a seed (xprof's --input-shape/-dtype/-range).
struct InputSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  std::string dtype = "float32";
  std::optional<double> low;
  std::optional<double> high;
};

struct ModelInfo {
  std::string path;
  std::string sha256;
  ModelFormat format = ModelFormat::TorchScript;
  std::string method = "forward";
  /// A TorchScript model torch.jit.freeze made (its weights are constants); absent where it was
  /// not recorded (programs, older profiles).
  std::optional<bool> frozen;
};

struct CacheInfo {
  std::int64_t l1d_bytes = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t l3_bytes = 0;
};

struct DeviceInfo {
  std::string type = "cpu";
  std::string name;
  std::int64_t threads = 1;       // intra-op threads used while profiling
  std::int64_t cores = 1;         // logical cores the process may use
  std::int64_t blas_threads = 0;  // the BLAS's own threads (OpenBLAS); 0: it has no such count
  double copy_bandwidth_gbps = 0; // measured plain contiguous copy (read + write bytes / s)
  CacheInfo caches;
  /// The BLAS, LAPACK and oneDNN files libtorch ran on ("path@bytes;..."; empty when unknown):
  /// a consumer's timing and output bits depend on them.
  std::string libraries;
};

/// One executed op of the profiled program.
struct Op {
  std::int64_t id = 0;
  std::string kind;
  SourceLoc source;
  Anchor anchor;
  std::string scope;      // module instance path, e.g. "blocks.0.attn" (may be empty)
  double start_ms = 0;    // when the op started in the timeline run, from the start of the run
  double duration_ms = 0; // in one run of the model: all its runs together
  double duration_spread_ms = 0;
  std::int64_t runs = 1;  // times it runs in one run of the model: loop trips; 0: not reached
  bool noisy = false;     // spread above a quarter of the median: read with care
  double utilization = 0; // busy fraction of the device's compute while the op ran, 0..1
  std::vector<std::int64_t> inputs;  // tensor value ids
  std::vector<std::int64_t> outputs; // tensor value ids
};

/// The op with this id in a profile's or a schedule's `ops` (ids are usually their positions);
/// nullptr when there is none.
const Op* findOp(const std::vector<Op>& ops, std::int64_t id);

/// A window in which the compute device has spare capacity. Work placed in it can start once op
/// `after_op_id` has finished and must be done before op `before_op_id` starts. `spare_cores`
/// says how much compute is idle meanwhile (CPU: cores not busy; GPU: 1 while the device idles).
struct IdleEvent {
  std::int64_t id = 0;
  std::int64_t before_op_id = 0;
  std::int64_t after_op_id = 0;
  double start_ms = 0;
  double duration_ms = 0;
  double spare_cores = 0;
  std::string device = "cpu";
  std::string kind; // "cpu-spare" (during ops), "host-gap" (between ops), "gpu-gap"
};

/// Measured `.contiguous()` time of one layout.
struct ConversionCost {
  Layout layout;
  std::vector<double> samples_ms;
  double median_ms = 0;
  double spread_ms = 0; // interquartile range of samples_ms
  bool noisy = false;   // spread above a quarter of the median
  /// A plain contiguous copy of the same bytes, timed right after each sample, and the median
  /// of the paired ratios sample / reference: the conversion's cost free of machine drift.
  std::optional<double> reference_ms;
  std::optional<double> ratio;
  std::optional<double> ratio_spread;
  /// What `aten::contiguous` pays beyond the copy for its fresh output: allocating it and the
  /// first touches of pages the allocator maps anew (a 37 MiB output: 3.4x the copy). The median
  /// of paired differences, a fresh conversion minus a copy into a reused buffer, and their IQR.
  /// Measured for a model's layouts; absent for the sweep's and in older profiles.
  std::optional<double> allocation_ms;
  std::optional<double> allocation_spread_ms;
  std::string source = "model"; // "model": a value of the profiled run; "sweep": synthetic
  /// The layout the conversion makes: row-major (`.contiguous()`, the seed's and every older
  /// profile's), or channels-last (`.contiguous(memory_format=...)`, a region's entry).
  LayoutTarget target = LayoutTarget::Contiguous;
  /// The layout's key, with "->channels_last" (the target) unless the target is row-major.
  std::string key() const;
};

// --- JSON mapping ------------------------------------------------------------------------------
nlohmann::json toJson(const Layout& v);
nlohmann::json toJson(const SourceLoc& v);
nlohmann::json toJson(const Anchor& v);
nlohmann::json toJson(const ModelInfo& v);
nlohmann::json toJson(const InputSpec& v);
nlohmann::json toJson(const CacheInfo& v);
nlohmann::json toJson(const DeviceInfo& v);
nlohmann::json toJson(const Op& v);
nlohmann::json toJson(const IdleEvent& v);
nlohmann::json toJson(const ConversionCost& v);

/// Reads layout fields (sizes, strides, storage_offset, dtype, device) from an object.
Layout readLayout(const JsonReader& r);
SourceLoc readSourceLoc(const JsonReader& r);
Anchor readAnchor(const JsonReader& r);
ModelInfo readModelInfo(const JsonReader& r);
InputSpec readInputSpec(const JsonReader& r);
DeviceInfo readDeviceInfo(const JsonReader& r);
Op readOp(const JsonReader& r);
IdleEvent readIdleEvent(const JsonReader& r);
ConversionCost readConversionCost(const JsonReader& r);

/// Adds the layout fields to an existing object (records and cost entries embed them).
void putLayout(nlohmann::json& obj, const Layout& v);

/// Rounds a time in milliseconds to nanosecond resolution so documents print stable, short numbers.
double roundMs(double ms);

} // namespace xalloc::formats
