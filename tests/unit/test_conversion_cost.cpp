// measureConversionCost and measureInPasses: how a layout's conversion is timed, what its fresh
// output costs, and what the timing database keeps of both.
#include <algorithm>
#include <filesystem>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "temp_path.h"
#include "xalloc/formats/types.h"
#include "xalloc/profiler/conversion_cost.h"
#include "xalloc/profiler/timing_db.h"

using namespace xalloc;
using xalloc::testing::tempPath;

// The sweep's measurement in passes: every wanted layout is materialized once per pass (a fresh
// placement each time) and gets its share of the repetitions in each; layouts not wanted are
// left out; a second run with the same database materializes each layout once and measures
// nothing.
TEST(ConversionCost, PassesSpreadEachLayoutsSamplesOverFreshPlacements) {
  const std::vector<std::vector<std::int64_t>> shapes = {{64, 48}, {32, 96}, {16, 80}};
  std::vector<int> made(shapes.size(), 0);
  std::vector<const void*> first_address(shapes.size(), nullptr);
  std::vector<bool> moved(shapes.size(), false);
  std::vector<at::Tensor> keep; // so that a freed block cannot come back at the same address
  auto materialize = [&](std::size_t i) {
    ++made[i];
    at::Tensor t = at::randn(shapes[i]).t();
    keep.push_back(t);
    if (!first_address[i])
      first_address[i] = t.data_ptr();
    else if (t.data_ptr() != first_address[i])
      moved[i] = true;
    return t;
  };
  profiler::PassOptions o;
  o.passes = 3;
  o.counts = [](const at::Tensor&) {
    return std::pair<int, int>{1, 7};
  };
  o.wanted = [](const formats::Layout& l) {
    return l.sizes[0] != 96;
  };
  std::size_t ticks = 0;
  o.tick = [&](std::size_t done) {
    ticks = done;
  };
  const std::string path = tempPath("passes.sqlite");
  std::filesystem::remove(path);
  {
    profiler::TimingDb db(path, "cpu|test", "lib");
    auto costs = profiler::measureInPasses(shapes.size(), materialize, o, &db);
    ASSERT_EQ(costs.size(), 2u);
    EXPECT_EQ(costs[0].layout.sizes, (std::vector<std::int64_t>{48, 64}));
    EXPECT_EQ(costs[1].layout.sizes, (std::vector<std::int64_t>{80, 16}));
    for (const auto& c : costs) {
      EXPECT_EQ(c.samples_ms.size(), 9u) << c.key(); // 3 passes of ceil(7 / 3)
      EXPECT_GT(c.median_ms, 0);
      EXPECT_GT(c.reference_ms, 0);
      EXPECT_FALSE(c.layout.isContiguous());
    }
    EXPECT_EQ(made, (std::vector<int>{3, 1, 3})); // the unwanted one only to see its layout
    EXPECT_TRUE(moved[0] && moved[2]);
    EXPECT_EQ(ticks, 3u * shapes.size());
  }
  profiler::TimingDb db(path, "cpu|test", "lib");
  std::fill(made.begin(), made.end(), 0);
  auto again = profiler::measureInPasses(shapes.size(), materialize, o, &db);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(made, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(again[0].samples_ms.size(), 9u);
  std::filesystem::remove(path);
}

// aten::contiguous writes a fresh output. Above glibc's largest mmap threshold (32 MiB) every
// call maps new pages and faults them in, which the copy into a reused buffer never sees: the
// conversion's cost says what that adds (allocation_ms), and the database keeps it.
TEST(ConversionCost, SaysWhatAFreshOutputCosts) {
  const at::Tensor large = at::randn({2560, 4096}).t(); // 40 MiB
  const std::string path = tempPath("fresh.sqlite");
  std::filesystem::remove(path);
  formats::ConversionCost first;
  {
    profiler::TimingDb db(path, "cpu|test", "lib");
    first = profiler::measureConversionCost(large, "model", 1, 6, &db);
  }
  ASSERT_TRUE(first.allocation_ms.has_value());
  ASSERT_TRUE(first.allocation_spread_ms.has_value());
  // (What a fresh output costs next to the copy is a measurement of this machine: the profiler's
  // README reports it; no unit test asserts a timing.)
  profiler::TimingDb db(path, "cpu|test", "lib");
  const auto again = profiler::measureConversionCost(large, "model", 1, 6, &db);
  EXPECT_EQ(again.allocation_ms, first.allocation_ms); // read back, not measured again
  EXPECT_EQ(again.median_ms, first.median_ms);
  const auto json = formats::toJson(first);
  EXPECT_TRUE(json.contains("allocation_ms")) << json.dump();
  std::filesystem::remove(path);
}
