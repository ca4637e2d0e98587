// profile.json: what xprof measured about one model run (docs/architecture.md, "The documents").
#pragma once

#include <map>

#include "xalloc/formats/region.h"
#include "xalloc/formats/types.h"

namespace xalloc::formats {

inline constexpr const char* kProfileSchema = "xalloc.profile";
/// 2: a region candidate names its layout by name (`layout`), not by target + packed. Version 1
/// is still read.
inline constexpr std::int64_t kProfileVersion = 2;
inline constexpr std::int64_t kProfileOldestVersion = 1;

/// One consumer of a tensor value, re-run in isolation with different layouts of that value.
struct ConsumerTiming {
  std::int64_t op_id = 0;
  std::int64_t input_index = 0;
  bool measured = false;
  double time_as_is_ms = 0;
  double time_as_is_spread_ms = 0;
  /// With the value made contiguous (records of non-contiguous values).
  std::optional<double> time_contiguous_ms;
  std::optional<double> time_contiguous_spread_ms;
  /// With the source of an existing conversion instead (records produced by aten::contiguous).
  std::optional<double> time_noncontiguous_ms;
  std::optional<double> time_noncontiguous_spread_ms;
  /// Median and IQR of the paired differences (other layout - as-is) of runs taken back to back:
  /// the tightest estimate of what the layout changes. Negative: the other layout is faster.
  std::optional<double> delta_ms;
  std::optional<double> delta_spread_ms;
  /// Outputs with the other layout are bit-identical to the outputs as-is.
  bool identical_output = true;
  /// When they are not: how far apart, as max |other - as-is| over max |as-is| per output, the
  /// largest (tspass::maxRelativeError). Absent when bit-identical, and when unbounded (other
  /// sizes, NaN where there was none): such a change fits no tolerance.
  std::optional<double> output_error;
  /// Outputs with the other layout also have the same sizes and strides: nothing downstream of
  /// the consumer can tell the difference, so its own timing is the whole effect.
  bool same_output_layout = true;
  /// False when the op refuses the non-contiguous layout (e.g. aten::view raises).
  bool accepts_noncontiguous = true;
  /// Times the consumer read this value in one run: in a program's profile, its calls that took
  /// a tensor this value's producer made (a weight transposed once and read in a loop is read
  /// more often than it is made). Absent: the consumer op's `runs` (TorchScript).
  std::optional<std::int64_t> reads;
  bool noisy = false; // a spread above a quarter of its median
  std::string note;   // why it was not measured, when it was not
  /// When the other layout changes this consumer's output layout (`same_output_layout` false):
  /// the consumers of that output (op_id, and input_index into its inputs), each re-run with the
  /// output the other layout gives in place of the output as it is, a few levels deep. What runs
  /// after a consumer that only re-strides (a transpose of a value made contiguous) is where the
  /// layout change gains or loses; its timings and error are the whole effect when every
  /// consumer of the output is here and keeps its own output layout (or is followed again).
  std::vector<ConsumerTiming> downstream;
};

/// A non-contiguous value made by a pointwise op that has an `out=` variant (aten::mul.out, ...):
/// the op then and a conversion after it, against the op writing a fresh row-major tensor itself
/// (its out variant into aten::empty_like(input, memory_format=contiguous_format)), timed in
/// paired rounds on the value's real inputs.
struct ProducerFusion {
  std::string op;                  // the out variant, "aten::mul.out"
  std::int64_t template_input = 0; // the producer's input with the output's sizes and dtype
  double separate_ms = 0;          // the op, then aten::contiguous
  double separate_spread_ms = 0;
  double fused_ms = 0; // the out variant into a row-major buffer (allocation included)
  double fused_spread_ms = 0;
  /// Median and IQR of the paired differences (fused - separate): negative when fusing is faster.
  double delta_ms = 0;
  double delta_spread_ms = 0;
  bool identical_output = true;       // the fused output's bits equal the separate one's
  std::optional<double> output_error; // when not: max |fused - separate| over max |separate|
};

/// One tensor value of the profiled program.
struct Record {
  std::int64_t id = 0;
  std::string name;
  std::optional<std::int64_t> producer_op; // absent for graph inputs
  std::int64_t output_index = 0;
  Origin origin = Origin::Op;
  Layout layout;
  bool contiguous = true;
  std::int64_t bytes = 0;         // numel * element size
  std::int64_t storage_id = 0;    // values that share a storage (views) share this id
  std::int64_t storage_bytes = 0; // size of that storage
  std::int64_t first_use = 0;
  std::int64_t last_use = 0;
  bool is_output = false;
  bool in_loop = false;
  /// In a loop: the tensor bytes its producer made over all its runs, divided by this record's
  /// bytes (the heaviest trip's value, which consumers and conversions are measured on). What a
  /// per-run measurement scales by for the run of the model: the producer's runs when every trip
  /// makes the same size, fewer when trips shrink (a detection head over FPN levels of 40x40 down
  /// to 3x3: 1.33, not 5). Absent outside loops and in older profiles (then: runs).
  std::optional<double> runs_by_bytes;
  bool has_writers = false; // something writes to this value's memory (aliasing makes edits unsafe)
  // Its memory is the module's (a weight, a buffer, a frozen constant, or a view of one): it
  // lives as long as the model, so it is not an activation.
  bool module_storage = false;
  std::vector<std::string> view_chain;
  std::vector<ConsumerTiming> consumers;
  /// Measured when the value is not contiguous and its producer could write it row-major itself.
  std::optional<ProducerFusion> producer_fusion;
};

struct ProfileSettings {
  std::int64_t iterations = 0;
  std::int64_t warmup = 0;
  std::int64_t repeats = 0;
  std::int64_t seed = 0;
  std::vector<InputSpec> inputs;
  std::string input_file; // inputs loaded from this file instead of generated
  bool sweep = false;
  std::string timing_db; // "" when the database was not used
  std::int64_t db_hits = 0;
  std::int64_t db_misses = 0;
  bool reused_profile = false; // the whole profile came from the database (nothing re-measured)
  /// A libtorch program's (`xprof run`) whole run as it takes without xprof: the hooked run's
  /// wall time less the hook's own work (unwinding, re-runs, conversions timed). 0: not known.
  double program_run_ms = 0;
  /// A TorchScript model's whole run as TorchScript itself runs it: its method called alone (no
  /// hooks, no grad), the median of the timed calls, in xprof's process before its measurements
  /// (glibc's malloc not yet pinned).
  /// It holds what the ops' times leave out: the allocator's first touches of fresh pages
  /// between the ops (glibc's malloc maps and unmaps large blocks; on a paravirtualized VM each
  /// page fault costs tens of microseconds), the interpreter. 0: not timed (an older profile,
  /// a program, or --budget left no time for it).
  double model_run_ms = 0;
};

struct Profile {
  std::string tool_version;
  ModelInfo model;
  DeviceInfo device;
  ProfileSettings settings;
  std::vector<Op> ops;
  std::vector<Record> records;
  std::vector<ConversionCost> conversion_cost_table;
  std::vector<IdleEvent> gpu_idle_events;
  /// Layout regions of the model frozen (region.h), each with its candidate layouts measured;
  /// empty when there are none or they could not be measured (`regions_note` says why).
  std::vector<Region> regions;
  std::string regions_note;

  const Op* findOp(std::int64_t id) const;
  const Record* findRecord(std::int64_t id) const;
};

nlohmann::json toJson(const Profile& p);
/// Validates and reads a profile document; throws FormatError naming the bad field.
Profile readProfile(const JsonReader& r);

} // namespace xalloc::formats
