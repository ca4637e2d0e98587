// One ulp at every layer's output (layer_noise.h).
#include "xalloc/tspass/layer_noise.h"

#include <cstring>
#include <limits>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/library.h>

#include "xalloc/tspass/graph_utils.h"

namespace xalloc::tspass {

using torch::jit::Node;
using torch::jit::Value;

namespace {

bool isLayer(const Node* n) {
  static const char* const kinds[] = {"aten::conv1d", "aten::conv2d", "aten::conv3d",
                                      "aten::linear", "aten::matmul", "aten::addmm",
                                      "aten::bmm"};
  for (const char* k : kinds)
    if (hasKind(n, k))
      return n->outputs().size() == 1 && n->output()->type()->cast<c10::TensorType>();
  return false;
}

// SplitMix64's finalizer: a well-mixed bit per (seed, element) without a generator's state, so
// the pass is one read and one write of each element, split over the threads like any other.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Bits one ulp from x's in magnitude: +1 moves away from zero, -1 toward it, whatever the sign.
template <typename Bits, typename T> T step(T x, bool up) {
  Bits b;
  std::memcpy(&b, &x, sizeof b);
  b = (up == (x > 0)) ? b + 1 : b - 1;
  std::memcpy(&x, &b, sizeof b);
  return x;
}

// In place: each element one ulp up or down (by a hash of the seed and its index in memory);
// zeros, subnormals, infinities and NaN as they are. One pass over memory: a detector's backbone
// at 800x800 has 150 million such elements, where nine ATen ops a layer (rand_like, where,
// nextafter, ...) took 12 s and faulted in a fresh tensor each.
at::Tensor& oneUlpAwayInPlace(at::Tensor& x, std::int64_t seed) { // NOLINT(misc-no-recursion)
  if (!at::isFloatingType(x.scalar_type()) || x.numel() == 0)
    return x;
  if (!x.is_non_overlapping_and_dense()) { // a view a matmul hands on: moved in a dense copy
    at::Tensor dense = x.contiguous();
    x.copy_(oneUlpAwayInPlace(dense, seed));
    return x;
  }
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "one_ulp_away_", [&] {
    using Bits = std::conditional_t<sizeof(scalar_t) == 4, std::uint32_t, std::uint64_t>;
    scalar_t* p = x.data_ptr<scalar_t>();
    const std::uint64_t s = mix(static_cast<std::uint64_t>(seed) + 0x9e3779b97f4a7c15ULL);
    constexpr int kBits = 64;
    at::parallel_for(0, (x.numel() + kBits - 1) / kBits, 1 << 10,
                     [&](std::int64_t b, std::int64_t e) {
                       for (std::int64_t blk = b; blk < e; ++blk) {
                         const std::uint64_t h = mix(s ^ static_cast<std::uint64_t>(blk));
                         const std::int64_t lo = blk * kBits, hi = std::min(lo + kBits, x.numel());
                         for (std::int64_t i = lo; i < hi; ++i) {
                           const scalar_t v = p[i];
                           if (std::abs(v) >= std::numeric_limits<scalar_t>::min() &&
                               std::abs(v) <= std::numeric_limits<scalar_t>::max())
                             p[i] = step<Bits>(v, (h >> (i - lo)) & 1);
                         }
                       }
                     });
  });
  return x;
}

} // namespace

int moveLayerOutputsOneUlp(torch::jit::Graph& graph) {
  int moved = 0;
  for (Node* n : allNodes(graph)) {
    if (!isLayer(n))
      continue;
    Value* y = n->output();
    const auto uses = y->uses();
    torch::jit::WithInsertPoint at(n->next());
    Value* away = graph.insert(c10::Symbol::fromQualString("xalloc_noise::one_ulp_away_"),
                               {y, static_cast<std::int64_t>(moved)});
    for (const auto& u : uses)
      u.user->replaceInput(u.offset, away);
    ++moved;
  }
  return moved;
}

} // namespace xalloc::tspass

// Registered where the pass lives: a graph it edits names this op only in this process.
TORCH_LIBRARY(xalloc_noise, m) {
  m.def("one_ulp_away_(Tensor(a!) self, int seed) -> Tensor(a!)",
        &xalloc::tspass::oneUlpAwayInPlace);
}
