// A libtorch program for the real-headers test: parsed with Debian's libtorch headers, patched,
// and compiled again.
#include <torch/types.h> // the tensor API without the C++ frontend: half the parse

torch::Tensor project(const torch::Tensor& x, const torch::Tensor& w) {
  auto xt = x.transpose(0, 1);
  return torch::matmul(xt, w);
}

int main() {
  auto y = project(torch::randn({64, 32}), torch::randn({64, 16}));
  return y.size(0) == 32 ? 0 : 1;
}
