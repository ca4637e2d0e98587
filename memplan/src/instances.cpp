// Seeded generators of planning instances.
#include "xalloc/memplan/instances.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

namespace xalloc::memplan {

std::vector<TensorSpec> randomDagInstance(std::uint64_t seed, int ops) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_size(6.0, 22.0);
  std::vector<TensorSpec> ts;
  ts.reserve(static_cast<std::size_t>(std::max(ops, 0)));
  for (int i = 0; i < ops; ++i) {
    TensorSpec t;
    t.id = "t" + std::to_string(i);
    t.size = static_cast<std::int64_t>(std::exp2(log_size(rng)));
    t.first_op = i;
    const int reach =
        rng() % 8 == 0 ? 1 + static_cast<int>(rng() % 40) : 1 + static_cast<int>(rng() % 4);
    t.last_op = std::min(ops - 1, i + reach);
    ts.push_back(std::move(t));
  }
  return ts;
}

std::vector<TensorSpec> networkDagInstance(std::uint64_t seed, int ops) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> jitter(0.8, 1.25);
  std::vector<TensorSpec> ts;
  std::int64_t op = 0;
  auto produce = [&](std::int64_t size) {
    TensorSpec t;
    t.id = "t" + std::to_string(ts.size());
    t.size = std::max<std::int64_t>(size, 1);
    t.first_op = t.last_op = op++;
    ts.push_back(std::move(t));
    return ts.size() - 1;
  };
  auto read = [&](std::size_t t) {
    ts[t].last_op = std::max(ts[t].last_op, op);
  };
  std::int64_t width = std::int64_t{1} << (18 + rng() % 4);
  std::size_t x = produce(width);
  while (op < ops) {
    if (rng() % 6 == 0) // a new stage: half or the same width (downsampling, more channels)
      width = std::max<std::int64_t>(4096, width / 2 * static_cast<std::int64_t>(1 + rng() % 2));
    const std::size_t block_in = x;
    const int layers = 2 + static_cast<int>(rng() % 3);
    std::size_t cur = x;
    for (int k = 0; k < layers; ++k) {
      const double expand = k + 1 == layers ? 1.0 : (rng() % 2 ? 4.0 : 1.0);
      const auto size =
          static_cast<std::int64_t>(static_cast<double>(width) * expand * jitter(rng));
      read(cur);
      if (rng() % 5 == 0) { // two branches, concatenated
        const std::size_t b1 = produce(size / 2);
        read(cur);
        const std::size_t b2 = produce(size / 2);
        read(b1);
        read(b2);
        cur = produce(size);
      } else {
        cur = produce(size);
      }
    }
    read(block_in); // the residual add reads the block input and the last layer
    read(cur);
    x = produce(ts[block_in].size);
  }
  return ts;
}

} // namespace xalloc::memplan
