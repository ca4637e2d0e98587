// Stand-in for x-allocator's runtime header in the C++ rewriting tests.
#pragma once
#include <torch/torch.h>

namespace xalloc::runtime {
class AsyncHandle {
public:
  at::Tensor wait() const;
};
AsyncHandle contiguousAsync(const at::Tensor& self);
at::Tensor contiguousFast(const at::Tensor& self);
} // namespace xalloc::runtime
