// Whether a tensor's storage holds every element its sizes, strides and offset reach: a model
// file can say anything about a tensor, and libtorch 1.13 believes it (a storage offset past
// the record: a crash; a record shorter than the sizes: heap memory read as weights). Header
// only, for the torch-facing parts (xalloc::torch_compat).
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

#include <ATen/core/Tensor.h>

namespace xalloc {

/// "" when `t` fits its storage (or holds no element, or has no storage to check: meta,
/// MKLDNN, sparse); else what is wrong, in words ("sizes [8, 4] reach element 40 of a storage
/// of 16").
inline std::string tensorExtentProblem(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0 || t.layout() != c10::kStrided || !t.has_storage() ||
      t.device().is_meta())
    return "";
  std::ostringstream why;
  std::int64_t last = t.storage_offset();
  if (last < 0) {
    why << "a negative storage offset " << last;
    return why.str();
  }
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    const std::int64_t st = t.stride(d), sz = t.size(d);
    if (st < 0) {
      why << "a negative stride " << st << " in dimension " << d;
      return why.str();
    }
    std::int64_t reach = 0;
    if (__builtin_mul_overflow(sz - 1, st, &reach) || __builtin_add_overflow(last, reach, &last)) {
      why << "sizes " << t.sizes() << " and strides " << t.strides() << " past any storage";
      return why.str();
    }
  }
  const std::uint64_t item = t.element_size();
  const std::uint64_t have = t.storage().nbytes() / item;
  if (static_cast<std::uint64_t>(last) < have && t.storage().data() != nullptr)
    return "";
  why << "sizes " << t.sizes() << " (offset " << t.storage_offset() << ") that reach element "
      << last << " of a storage of " << have;
  return why.str();
}

} // namespace xalloc
