// The one place for what differs between the libtorch versions x-allocator builds against:
// the pinned torch wheel's libtorch (requirements.txt) and the GPU machine's torch 2.11.
// Everything else includes this header instead of spelling version checks out.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/jit/frontend/source_range.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/scope.h>
#include <torch/version.h>

#define XALLOC_TORCH_AT_LEAST(major, minor)                                                        \
  (TORCH_VERSION_MAJOR > (major) ||                                                                \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// c10::Allocator changed in 2.3: allocate() is no longer const, and copy_data() is a pure
// virtual every allocator implements. The runtime's allocators spell both with these.
#if XALLOC_TORCH_AT_LEAST(2, 3)
#define XALLOC_ALLOCATE_CONST
#define XALLOC_ALLOCATOR_COPY_DATA                                                                 \
  void copy_data(void* dest, const void* src, std::size_t count) const override {                  \
    default_copy_data(dest, src, count);                                                           \
  }
#else
#define XALLOC_ALLOCATE_CONST const
#define XALLOC_ALLOCATOR_COPY_DATA
#endif

// libtorch's accessors of an MKLDNN tensor's buffer (ATen/native/mkldnn/MKLDNNCommon.h, exported
// by libtorch_cpu since 2.1; the wheel ships no header for them).
namespace at::native {
TORCH_API void* data_ptr_from_mkldnn(const at::Tensor& mkldnn_tensor);
TORCH_API int64_t nbytes_from_mkldnn(const at::Tensor& mkldnn_tensor);
} // namespace at::native

namespace xalloc::compat {

/// The data of an MKLDNN tensor, and its physical size in bytes (oneDNN's padding included).
inline void* mkldnnData(const at::Tensor& t) {
  return at::native::data_ptr_from_mkldnn(t);
}
inline std::int64_t mkldnnBytes(const at::Tensor& t) {
  return at::native::nbytes_from_mkldnn(t);
}

/// The text a source range covers, as std::string (1.13 returns a StringCordView; older
/// releases returned std::string; 2.x returns a StringCordView again).
inline std::string rangeText(const torch::jit::SourceRange& r) {
#if XALLOC_TORCH_AT_LEAST(1, 12)
  return r.text().str();
#else
  return r.text();
#endif
}

/// The whole text of the source a range points into.
inline std::string sourceText(const torch::jit::Source& s) {
#if XALLOC_TORCH_AT_LEAST(1, 12)
  return s.text_str().str();
#else
  return s.text();
#endif
}

/// The source range a node's range was generated from (the user's .py file for a module loaded
/// from disk), or the range itself. c10::optional became std::optional in 2.x; hide that.
inline torch::jit::SourceRange originalRange(const torch::jit::SourceRange& r) {
  auto orig = r.findSourceRangeThatGenerated();
  if (orig)
    return *orig;
  return r;
}

/// (file, 1-based line, 1-based column) of a range. Sources without a file name (a module made
/// with Module::define) are reported as "<string>" with lines counted from the source's start.
inline std::optional<std::tuple<std::string, std::size_t, std::size_t>>
fileLineCol(const torch::jit::SourceRange& r) {
  const auto& src = r.source();
  if (!src)
    return std::nullopt;
  std::size_t line = src->lineno_for_offset(r.start());
  std::size_t col = r.start() - src->offset_for_line(line) + 1;
  if (!src->filename())
    return std::make_tuple(std::string("<string>"), line + 1, col);
  return std::make_tuple(*src->filename(), src->lineno_to_source_lineno(line), col);
}

/// Module instance names along a node's inlined call stack, outermost first ("0", "attn", ...).
/// The InlinedCallStackEntry tuple grew a fourth element in 2.x; std::get<2> is stable.
inline std::vector<std::string> inlinedModuleInstances(const torch::jit::Node* n) {
  std::vector<std::string> out;
  auto cs = n->callstack();
  if (!cs)
    return out;
  for (const auto& entry : (*cs)->vec()) {
    const auto& inst = std::get<2>(entry);
    if (inst)
      out.push_back(inst->instance_name());
  }
  return out;
}

/// PyTorch-style dtype names ("float32", "int64", ...), matching formats::dtypeSize.
inline std::string dtypeName(c10::ScalarType t) {
  switch (t) {
  case c10::ScalarType::Bool:
    return "bool";
  case c10::ScalarType::Byte:
    return "uint8";
  case c10::ScalarType::Char:
    return "int8";
  case c10::ScalarType::Short:
    return "int16";
  case c10::ScalarType::Int:
    return "int32";
  case c10::ScalarType::Long:
    return "int64";
  case c10::ScalarType::Half:
    return "float16";
  case c10::ScalarType::BFloat16:
    return "bfloat16";
  case c10::ScalarType::Float:
    return "float32";
  case c10::ScalarType::Double:
    return "float64";
  case c10::ScalarType::ComplexFloat:
    return "complex64";
  case c10::ScalarType::ComplexDouble:
    return "complex128";
  default:
    return c10::toString(t);
  }
}

/// Inverse of dtypeName; nullopt for names we do not know.
inline std::optional<c10::ScalarType> parseDtype(const std::string& name) {
  for (auto t :
       {c10::ScalarType::Bool, c10::ScalarType::Byte, c10::ScalarType::Char, c10::ScalarType::Short,
        c10::ScalarType::Int, c10::ScalarType::Long, c10::ScalarType::Half,
        c10::ScalarType::BFloat16, c10::ScalarType::Float, c10::ScalarType::Double,
        c10::ScalarType::ComplexFloat, c10::ScalarType::ComplexDouble})
    if (dtypeName(t) == name)
      return t;
  return std::nullopt;
}

} // namespace xalloc::compat
