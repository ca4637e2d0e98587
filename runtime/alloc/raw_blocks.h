// The blocks of the runtime's CPU allocators (the graceful allocator, the activation cache) that
// libtorch's raw interface may free. oneDNN (ideep) tensors allocate with
// GetAllocator(CPU)->raw_allocate and free with GetAllocator(CPU)->raw_deallocate, which calls
// the raw deleter of whatever allocator is installed *at the time of the free*: a weight packed
// before an install is freed through the installed allocator, and a tensor made inside an
// install may be freed after it ended. So every allocator of the runtime's frees raw pointers
// through rawFree, which frees a block of its own through the deleter it was registered with and
// every other pointer through libtorch's allocator, and the graceful allocator's uninstall leaves
// the runtime's pass-through allocator (frontAllocator) in place of libtorch's.
#pragma once

#include <cstddef>

#include <c10/core/Allocator.h>

namespace xalloc::runtime::detail {

/// Registers a block handed out with `data == context`; `deleter` frees it.
void noteRawBlock(void* data, c10::DeleterFnPtr deleter);
/// Forgets it (its deleter calls this before freeing).
void forgetRawBlock(void* data);
/// The deleter `data` was registered with; nullptr when it was not.
c10::DeleterFnPtr rawBlockDeleter(const void* data);
/// Registers every block in [base, base + bytes) at once (an arena); `deleter` frees them.
void noteRawRange(const void* base, std::size_t bytes, c10::DeleterFnPtr deleter);
void forgetRawRange(const void* base);
/// The raw deleter of every allocator of the runtime's: a registered block through its deleter,
/// anything else through libtorch's default CPU allocator.
void rawFree(void* data);

/// libtorch's allocator for every request, freeing raw pointers through rawFree (and, inside an
/// activation scope, large requests from the activation cache: activation_cache.h).
c10::Allocator* frontAllocator();

} // namespace xalloc::runtime::detail
