// For xrewrite --cpp's write check: each function makes a view that a schedule converts, then
// writes it (or what it is a view of) where the profiler cannot see: through an accessor, a raw
// pointer, an in-place call, an out= argument, a non-const reference, an assignment to a view, or
// a helper of its own. None may be converted; `clean` may.
#include <torch/types.h>

void fill(at::Tensor& t) {
  t.fill_(2);
}

void poke(const at::Tensor& t) {
  t.data_ptr<float>()[0] = 3;
}

float peek(const at::Tensor& t) {
  const float* p = t.data_ptr<float>();
  return p[0];
}

float accessor_write(const at::Tensor& x) {
  auto v = x.transpose(0, 1);
  auto a = v.accessor<float, 2>();
  a[0][1] = 1000;
  return x[1][0].item<float>();
}

float pointer_write(const at::Tensor& x) {
  auto v = x.narrow(0, 1, 2);
  v.data_ptr<float>()[0] = 5;
  return x.sum().item<float>();
}

void in_place(const at::Tensor& x) {
  auto v = x.t();
  v.index_put_({0}, 1);
}

void copy_into(const at::Tensor& x, const at::Tensor& y) {
  auto v = x.t();
  v.copy_(y);
}

void out_argument(const at::Tensor& x, const at::Tensor& a) {
  auto v = x.t();
  at::add_out(v, a, a);
}

void by_reference(const at::Tensor& x) {
  auto v = x.t();
  fill(v);
}

void through_helper(const at::Tensor& x) {
  auto v = x.t();
  poke(v);
}

void assign_view(const at::Tensor& x) {
  auto v = x.t();
  v[0] = 7;
}

float base_written(const at::Tensor& x) {
  auto v = x.t();
  x.data_ptr<float>()[0] = 1;
  return v.sum().item<float>();
}

at::Tensor clean(const at::Tensor& x, const at::Tensor& w) {
  auto v = x.transpose(0, 1);
  const float first = peek(v);
  return at::matmul(v, w) * first;
}

int main() {
  auto x = torch::randn({4, 4});
  return accessor_write(x) + pointer_write(x) + base_written(x) > 1e9 ? 1 : 0;
}
