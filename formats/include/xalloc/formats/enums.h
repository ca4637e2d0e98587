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
