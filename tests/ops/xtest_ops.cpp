// A library of custom ops, as a project (or torchvision, with its _C module) ships them: what
// `--load-library` loads before a model that calls them. Loaded by tests/cli/oplib.sh.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace {

// The sum of each row, scaled: an op of the library's own namespace, not of ATen's.
at::Tensor scaledRowSum(const at::Tensor& x, double scale) {
  return x.sum(-1) * scale;
}

} // namespace

TORCH_LIBRARY(xtest, m) {
  m.def("scaled_row_sum(Tensor x, float scale) -> Tensor", scaledRowSum);
}
