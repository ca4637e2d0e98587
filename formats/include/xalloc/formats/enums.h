// The documents' named values as enums, each with one table of its names: `toString(e)` writes
// a name, `fromString<E>(text)` reads one (nullopt for a name the schema does not list), and
// `namesOf<E>()` lists them for messages. Compared as enums everywhere, never as strings.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace xalloc::formats {

/// What a profile was taken of (model.format).
enum class ModelFormat { TorchScript, LibtorchProgram };

/// Where a tensor value comes from (a record's origin).
enum class Origin {
  Op,          // made by an op of the model
  Input,       // an input of the graph or program
  Attribute,   // a module's attribute (a parameter, a buffer)
  Constant,    // computed from constants alone (a frozen weight's transpose): xrewrite converts
               // it once, into the model, so converting it costs nothing at run time
  LoopCarried, // a loop body's own parameter: no op of its own produces it
};

/// The rewrite a plan is for (schedule summary.form, xsched/xrewrite --form): "portable" (every
/// conversion an aten::contiguous with a fresh output; no async) or "fast" (the runtime's
/// conversions, which reuse large outputs, and async ones in idle windows).
enum class RewriteForm { Portable, Fast };

/// The layout a conversion or a region produces (a decision's `target`): row-major contiguous
/// (what `.contiguous()` makes), channels-last for 4-D and 5-D tensors, or oneDNN's blocked
/// format (`to_mkldnn` at a region's entries, `to_dense` at its exits).
enum class LayoutTarget { Contiguous, ChannelsLast, ChannelsLast3d, Blocked };

/// What kept a site from the edit it was weighed for (a decision's `blocker`), one kind a tool
/// can count; None for an edit made. The rule that decided (`rule`) says which check it was.
enum class Blocker {
  None,
  Written,         // the value, or a conversion's input or output, is written in place
  NoCostModel,     // no cost model prices the conversion
  OutputBits,      // a consumer's outputs move beyond the tolerance (any bit under --exact)
  OutputLayout,    // a consumer's output changes layout, and what runs after it was not weighed
  Unmeasured,      // a consumer (or the region) could not be measured
  NeedsContiguous, // a consumer needs the conversion's contiguous output
  NothingToGain, // no consumer reads data a layout can speed up (sizes, views, a copy made anyway)
  BelowMargin,   // a gain, but not beyond the noise margin or the smallest gain worth an edit
  NoSourceEdit,  // libtorch makes it: the program has no expression of its own to edit
  NotRecorded,   // the conversion's input was not recorded
  OtherFormat,   // the conversion makes another memory format
  NeedsRuntime,  // a region layout only the runtime's ops run (xsched --form fast)
  Unfrozen,      // a region of a model profiled unfrozen
  OtherShape,    // slower, unmeasured or not a region at another shape profiled
  Plan,          // the plan's choice: the solver, the memory budget, an overlapping edit, a region
};

template <class E> struct EnumNames;
template <> struct EnumNames<ModelFormat> {
  static constexpr std::pair<ModelFormat, const char*> table[] = {
      {ModelFormat::TorchScript, "torchscript"},
      {ModelFormat::LibtorchProgram, "libtorch-program"}};
};
template <> struct EnumNames<Origin> {
  static constexpr std::pair<Origin, const char*> table[] = {{Origin::Op, "op"},
                                                             {Origin::Input, "input"},
                                                             {Origin::Attribute, "attribute"},
                                                             {Origin::Constant, "constant"},
                                                             {Origin::LoopCarried, "loop-carried"}};
};
template <> struct EnumNames<RewriteForm> {
  static constexpr std::pair<RewriteForm, const char*> table[] = {
      {RewriteForm::Portable, "portable"}, {RewriteForm::Fast, "fast"}};
};

template <> struct EnumNames<LayoutTarget> {
  static constexpr std::pair<LayoutTarget, const char*> table[] = {
      {LayoutTarget::Contiguous, "contiguous"},
      {LayoutTarget::ChannelsLast, "channels_last"},
      {LayoutTarget::ChannelsLast3d, "channels_last_3d"},
      {LayoutTarget::Blocked, "blocked"}};
};

template <> struct EnumNames<Blocker> {
  static constexpr std::pair<Blocker, const char*> table[] = {
      {Blocker::None, "none"},
      {Blocker::Written, "written"},
      {Blocker::NoCostModel, "no-cost-model"},
      {Blocker::OutputBits, "output-bits"},
      {Blocker::OutputLayout, "output-layout"},
      {Blocker::Unmeasured, "unmeasured"},
      {Blocker::NeedsContiguous, "needs-contiguous"},
      {Blocker::NothingToGain, "nothing-to-gain"},
      {Blocker::BelowMargin, "below-margin"},
      {Blocker::NoSourceEdit, "no-source-edit"},
      {Blocker::NotRecorded, "not-recorded"},
      {Blocker::OtherFormat, "other-format"},
      {Blocker::NeedsRuntime, "needs-runtime"},
      {Blocker::Unfrozen, "unfrozen"},
      {Blocker::OtherShape, "other-shape"},
      {Blocker::Plan, "plan"}};
};

template <class E> const char* toString(E e) {
  for (const auto& [value, name] : EnumNames<E>::table)
    if (value == e)
      return name;
  return "?";
}

template <class E> std::optional<E> fromString(std::string_view text) {
  for (const auto& [value, name] : EnumNames<E>::table)
    if (text == name)
      return value;
  return std::nullopt;
}

/// "'portable' or 'fast'", "'op', 'input', ... or 'loop-carried'".
template <class E> std::string namesOf() {
  std::string out;
  const std::size_t n = std::size(EnumNames<E>::table);
  for (std::size_t i = 0; i < n; ++i)
    out += (i == 0       ? "'"
            : i + 1 == n ? " or '"
                         : ", '") +
           std::string(EnumNames<E>::table[i].second) + "'";
  return out;
}

} // namespace xalloc::formats
