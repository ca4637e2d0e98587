// schedule.json: one decision per conversion site, and what the scheduler predicts they achieve.
#pragma once

#include <variant>

#include "xalloc/formats/region.h"
#include "xalloc/formats/types.h"

namespace xalloc::formats {

inline constexpr const char* kScheduleSchema = "xalloc.schedule";
/// 2: every decision names its target layout, and decisions may be about a whole region.
/// 3: a region decision names its layout by name (`region_layout`), not by target + packed.
/// Version 2 is still read.
inline constexpr std::int64_t kScheduleVersion = 3;
inline constexpr std::int64_t kScheduleOldestVersion = 2;

enum class Action { None, Sync, Async, Remove };
const char* actionName(Action a);
/// Parses "none" | "sync" | "async" | "remove"; nullopt otherwise.
std::optional<Action> parseAction(const std::string& s);

/// A number or a word a decision rests on, by name ("saving_ms": 0.12, "op": "aten::view"),
/// as an LLVM remark's arguments: the rule that decided gives them, the reason is the words
/// xsched's wording puts around them. Times end in `_ms`; flags are 0 or 1.
struct NamedValue {
  std::string name;
  std::variant<double, std::string> value;
};
using NamedValues = std::vector<NamedValue>;
/// Sets `name` in `values`: replaced where it is, added at the end where it is not.
void setValue(NamedValues& values, const std::string& name, std::variant<double, std::string> v);

struct Decision {
  std::int64_t value_id = 0;
  std::string value_name;
  std::int64_t producer = 0;     // op id that produced the value (the conversion itself for remove)
  std::int64_t output_index = 0; // which output of the producer
  /// sync/async: the consumers that read the converted copy; remove: the conversion's consumers;
  /// none: the consumers a conversion would have served (measured, bit-identical outputs).
  std::vector<std::int64_t> consumers;
  Action action = Action::None;
  std::optional<std::int64_t> window_id; // async only
  double predicted_cost_ms = 0;
  double predicted_saving_ms = 0;
  Anchor anchor;                      // of the producer
  std::optional<Anchor> input_anchor; // remove: producer of the conversion's input
  Layout layout;
  std::string reason;
  /// What decided it, as data: a rule of xsched's rules.def ("no-gain", "convert", ...), or
  /// "one-edit" (the calls of one source expression decided together), "overlap" rules' ids,
  /// "solver" (the plan's choice: async in a window, or dropped), "memory-budget",
  /// "layout-region" (inside a region that runs in another layout), "region" (a region's own
  /// decision). Empty in schedules written before it was recorded.
  std::string rule;
  /// What kept the site from its edit (None for an edit made), and the named values the rule
  /// weighed; `reason` says both in words.
  Blocker blocker = Blocker::None;
  NamedValues values;
  /// The layout a sync/async conversion makes (a region's: the memory format of the layout it
  /// runs in); for a value decision, row-major contiguous or channels-last.
  LayoutTarget target = LayoutTarget::Contiguous;
  /// Present for a decision about a whole region (action sync: run it in `region_layout`;
  /// none: leave it), whose anchor is that of its first op.
  std::optional<RegionRef> region;
  /// A region decision's layout, a row of layout_traits.cpp (its target is `target`); null for
  /// a value decision.
  const LayoutTraits* region_layout = nullptr;
  /// The input shapes a region decision was measured to hold for (xsched --shape-profile): each
  /// a profile's inputs, "1x3x224x224" (several inputs joined by ","); empty when the plan was
  /// made from one profile, whose shapes the schedule's model section does not record.
  std::vector<std::string> holds_for;

  /// Makes it a decision to run `ref` in `layout` (target included).
  void setRegion(RegionRef ref, const LayoutTraits& layout);
  /// A sync decision to row-major whose producer writes the value row-major itself (its out
  /// variant into a row-major buffer; ProducerFusion measured it faster than a separate
  /// conversion), or a remove decision of an existing row-major conversion whose input's
  /// producer then writes row-major itself: the producer's input with the output's sizes and
  /// dtype, which the buffer is made like.
  std::optional<std::int64_t> fused_template_input;
};

/// Both decisions are about one expression of a source: the same site (Anchor::sameSite) at the
/// same line and column, and the same output of it. In a C++ program's schedule that is one
/// expression reached from several call stacks, which one source edit changes together.
bool sameExpression(const Decision& a, const Decision& b);

/// The numeric tolerance when none is asked for (xsched, xrewrite): how far outputs may move,
/// element by element, each relative to itself with a floor near zero (tspass::maxRelativeError
/// says exactly). A layout that reorders a kernel's sums moves float32 outputs by ~1e-6; 1e-4
/// leaves room for that and no more.
inline constexpr double kDefaultTolerance = 1e-4;
/// The most a tolerance may be, on the command line or in a schedule file: beyond 1% a rewrite
/// is no longer "the same outputs".
inline constexpr double kMaxTolerance = 1e-2;

/// The one accept rule for a measured change of outputs (a consumer with the other layout, a
/// region's candidate, a producer fused with its conversion, a rewritten model against the
/// original): bit-identical always passes; an error within `tolerance` passes; no bounded error
/// never does; a tolerance of 0 (--exact) admits bit-identical only.
bool withinTolerance(bool identical_output, const std::optional<double>& output_error,
                     double tolerance);

/// What a change of outputs may be beside float32's own noise: `reference` is how far the
/// original's own outputs move under one ulp of their inputs or under freezing alone (one draw
/// of that noise); a rewrite adds such noise to freezing's, so up to twice it is the same kind
/// of change. The tolerance, or that where it is larger; --exact (0) stays exact, and a
/// reference not measured or unbounded counts nothing.
double noiseBound(double tolerance, const std::optional<double>& reference);

/// A tool's --tolerance and --exact flags (xsched, xrewrite): a tolerance is a number in
/// (0, kMaxTolerance], and the two exclude each other; InputError naming `tool` otherwise.
void checkToleranceFlags(const std::optional<double>& tolerance, bool exact,
                         const std::string& tool);

struct ScheduleSummary {
  double predicted_time_before_ms = 0;
  double predicted_time_after_ms = 0;
  std::int64_t peak_bytes_before = 0;
  std::int64_t peak_bytes_after = 0;
  std::optional<std::int64_t> memory_budget_bytes;
  std::string solver;
  bool optimal = false;
  double gap = 0; // relative optimality gap, 0 when optimal
  /// No plan is predicted faster than this (the solver's bound); equals the predicted time after
  /// when the plan is optimal.
  double predicted_time_bound_ms = 0;
  /// True when the time before is of the whole run: a program's (the profile's program_run_ms;
  /// after too), a model's method called alone (model_run_ms; after is in the ops' unit when
  /// the rewrite's tensors come from the runtime's arena, else the run scaled as its ops are).
  /// False when both are the ops' times summed (a program's: the call sites the hook timed).
  bool whole_run = false;
  std::int64_t nodes = 0;     // branch-and-bound nodes the solver visited
  double window_safety = 0.9; // fraction of each idle window's capacity the plan may fill
  /// The form of rewrite the plan's costs are for (`xsched --form`; enums.h); none in schedules
  /// from before it was recorded.
  std::optional<RewriteForm> form;
  /// The numeric tolerance the plan allows (`--tolerance`; 0: `--exact`, bit-identical outputs):
  /// element by element as kDefaultTolerance says; at most kMaxTolerance. Absent in schedules from
  /// before it was recorded, which were planned bit-identical.
  std::optional<double> tolerance;
  /// The largest such error xrewrite measured between the rewritten and the original model (on
  /// the profile's inputs and fresh random ones): in the schedule stored in a rewritten model.
  std::optional<double> measured_error;
  /// The fast form's fusions xrewrite ran after the regions (tspass/fusions.h), by name, with
  /// how many places each rewrote (0: it ran and found none); those switched off
  /// (`--no-fusion`) are absent: in the schedule stored in a rewritten model.
  struct FusionCount {
    std::string name;
    std::int64_t count = 0;
    bool operator==(const FusionCount& o) const { return name == o.name && count == o.count; }
  };
  std::vector<FusionCount> fusions;
};

struct Schedule {
  std::string tool_version;
  ModelInfo model;
  /// The device the profile was taken on (its timings are for it); absent in older schedules.
  std::optional<DeviceInfo> device;
  std::vector<Op> ops;
  std::vector<IdleEvent> gpu_idle_events;
  std::vector<Decision> decisions;
  ScheduleSummary summary;
  /// The inputs the profile was measured on (its settings), so that xrewrite verifies the rewrite
  /// on them without being told again: generated ones, or the file xprof read them from (as it
  /// was named to xprof). Empty in schedules from before they were carried.
  std::vector<InputSpec> inputs;
  std::string input_file;

  /// Number of decisions with the given action.
  std::int64_t count(Action a) const;
  /// The op with this id; nullptr when the schedule does not list it.
  const Op* findOp(std::int64_t id) const { return formats::findOp(ops, id); }
};

nlohmann::json toJson(const Schedule& s);
Schedule readSchedule(const JsonReader& r);

} // namespace xalloc::formats
