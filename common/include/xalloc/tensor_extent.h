// Whether a tensor's storage holds every element its sizes, strides and offset reach, and
// whether the storage holds the bytes it says: a model file can say anything about a tensor,
// and libtorch 1.13 believes it (a storage offset past the record: a crash; a record shorter
// than the storage the pickle says: heap memory read as weights). Header only, for the
// torch-facing parts (xalloc::torch_compat).
#pragma once

#include <malloc.h>

#include <cstdint>
#include <sstream>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/CPUAllocator.h>

namespace xalloc {

/// What the default CPU allocator frees its blocks with (libtorch reads a model's records into
/// blocks of it).
inline c10::DeleterFnPtr defaultCpuDeleter() {
  static const c10::DeleterFnPtr d = [] {
    const c10::DataPtr probe = c10::GetDefaultCPUAllocator()->allocate(64);
    return probe.get_deleter();
  }();
  return d;
}

/// "" when `t` fits its storage and, for a storage in a block of libtorch's default CPU
/// allocator, the storage fits its block (or `t` holds no element, or has no storage to check:
/// meta, MKLDNN, sparse); else what is wrong, in words ("sizes [8, 4] (offset 0) that reach
/// element 31 of a storage of 16").
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
  if (static_cast<std::uint64_t>(last) >= have || t.storage().data() == nullptr) {
    why << "sizes " << t.sizes() << " (offset " << t.storage_offset() << ") that reach element "
        << last << " of a storage of " << have;
    return why.str();
  }
  // libtorch 1.13 makes a storage of the size the pickle says around the record it read,
  // whatever the record's size: a storage in a block of the CPU allocator must fit that block.
  const c10::DataPtr& dp = t.storage().data_ptr();
  if (t.device().is_cpu() && dp.get_context() == dp.get() &&
      dp.get_deleter() == defaultCpuDeleter()) {
    const std::size_t block = malloc_usable_size(dp.get());
    if (block < t.storage().nbytes()) {
      why << "a storage of " << t.storage().nbytes() << " bytes read from a record of at most "
          << block;
      return why.str();
    }
  }
  return "";
}

} // namespace xalloc
