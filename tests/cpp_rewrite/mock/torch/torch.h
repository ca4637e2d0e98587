// A small stand-in for <torch/torch.h>: just the declarations xrewrite's C++ tests use, so the
// golden tests parse in milliseconds. The real-headers test compiles against libtorch itself.
#pragma once
#include <cstdint>
#include <vector>

namespace c10 {
enum class MemoryFormat { Contiguous, Preserve, ChannelsLast, ChannelsLast3d };
}
namespace at {
using c10::MemoryFormat;
class TensorBase {
public:
  bool is_contiguous() const;
};
class Tensor : public TensorBase {
public:
  Tensor transpose(std::int64_t a, std::int64_t b) const;
  Tensor permute(std::vector<std::int64_t> dims) const;
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  Tensor contiguous(c10::MemoryFormat f = c10::MemoryFormat::Contiguous) const;
  Tensor matmul(const Tensor& other) const;
  Tensor operator+(const Tensor& other) const;
  Tensor operator*(double s) const;
  Tensor t() const;
};
Tensor relu(const Tensor& x);
Tensor randn(std::vector<std::int64_t> sizes);
} // namespace at
namespace torch {
using at::randn;
using at::relu;
using at::Tensor;
} // namespace torch
