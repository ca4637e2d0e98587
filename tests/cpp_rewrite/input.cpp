#include <torch/torch.h>

#define TRANSPOSED(x) (x).transpose(0, 1)

namespace model {

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k) {
  auto kt = k.transpose(0, 1);
  auto scores = q.matmul(kt);
  return scores;
}

torch::Tensor mix(const torch::Tensor& a, const torch::Tensor& b) {
  auto s = (a + b).matmul(b.t());
  auto again = a.transpose(0, 1).contiguous();
  auto first = a.transpose(0, 1);
  auto second = a.transpose(0, 1);
  return first.matmul(second) + again;
}

torch::Tensor load(const torch::Tensor& seq) {
  auto x = seq.narrow(1, 0, 8).contiguous();
  return torch::relu(x);
}

torch::Tensor macro(const torch::Tensor& a) {
  return TRANSPOSED(a).matmul(a);
}

template <typename T> T generic(const T& a) {
  return a.transpose(0, 1).matmul(a);
}

} // namespace model

int main() {
  auto q = torch::randn({4, 4});
  auto out = model::attention(q, q) + model::mix(q, q) + model::load(q) + model::macro(q);
  return out.is_contiguous() ? 0 : 1;
}
