// The profiler's timing database and idle windows: measurements scoped to their device and
// library, a second profile that measures nothing again, a finished profile reused whole, the
// sweep, the Perfetto trace and inputs from a file.
#include <filesystem>
#include <map>
#include <set>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/serialization/pickle.h>
#include <unistd.h>

#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/io.h"
#include "xalloc/profiler/idle_windows.h"
#include "xalloc/profiler/profiler.h"
#include "xalloc/profiler/timing_db.h"

#include "profile_samples.h"
#include "temp_path.h"

using namespace xalloc;
using xalloc::testing::quickOptions;
using xalloc::testing::samplePath;
using xalloc::testing::tempPath;

TEST(IdleWindows, SpareCoresDuringOpsAndHostGapsBetweenThem) {
  std::vector<profiler::OpTiming> timeline = {{0.0, 1.0}, {1.0, 2.0}, {3.5, 1.0}, {4.5, 1.0}};
  std::vector<formats::Op> ops(4);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    ops[i].id = static_cast<std::int64_t>(i);
    ops[i].duration_ms = timeline[i].duration_ms;
  }
  ops[1].utilization = 0.5; // one of two cores busy
  ops[2].utilization = 1.0;
  auto w = profiler::findCpuIdleWindows(timeline, ops, 2, 0.01);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].kind, "cpu-spare");
  EXPECT_EQ(w[0].after_op_id, 0);
  EXPECT_EQ(w[0].before_op_id, 2);
  EXPECT_DOUBLE_EQ(w[0].spare_cores, 1.0);
  EXPECT_DOUBLE_EQ(w[0].duration_ms, 2.0);
  EXPECT_EQ(w[1].kind, "host-gap");
  EXPECT_EQ(w[1].after_op_id, 1);
  EXPECT_EQ(w[1].before_op_id, 2);
  EXPECT_DOUBLE_EQ(w[1].start_ms, 3.0);
  EXPECT_DOUBLE_EQ(w[1].duration_ms, 0.5);
  // On one core the interpreter's host work leaves nothing spare; an op that kept the core busy
  // half the time still leaves half of it. A longer minimum hides the gap.
  auto one = profiler::findCpuIdleWindows(timeline, ops, 1, 0.01);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].kind, "cpu-spare");
  EXPECT_DOUBLE_EQ(one[0].spare_cores, 0.5);
  EXPECT_EQ(profiler::findCpuIdleWindows(timeline, ops, 2, 1.0).size(), 1u);
}

TEST(TimingDb, ReusesOnlyMatchingDeviceAndLibrary) {
  const std::string path = tempPath("db.sqlite");
  std::filesystem::remove(path);
  {
    profiler::TimingDb db(path, "cpu|A", "torch 1|xalloc 1");
    profiler::TimingStats s = profiler::summarize({1.0, 2.0, 3.0});
    db.put("k", {s, 0.5});
    db.commit();
    auto hit = db.get("k");
    ASSERT_TRUE(hit.has_value());
    EXPECT_EQ(hit->stats.median_ms, 2.0);
    EXPECT_EQ(hit->stats.samples_ms.size(), 3u);
    EXPECT_EQ(hit->aux, 0.5);
  }
  EXPECT_FALSE(profiler::TimingDb(path, "cpu|B", "torch 1|xalloc 1").get("k").has_value());
  EXPECT_FALSE(profiler::TimingDb(path, "cpu|A", "torch 2|xalloc 1").get("k").has_value());
  EXPECT_TRUE(profiler::TimingDb(path, "cpu|A", "torch 1|xalloc 1").get("k").has_value());
  std::filesystem::remove(path);
  EXPECT_THROW(profiler::TimingDb("/proc/xalloc-no-such-dir/db.sqlite", "a", "b"), InputError);
}

TEST(TimingDb, SecondProfileOfAModelMeasuresNothingAgain) {
  const std::string path = tempPath("model.sqlite");
  std::filesystem::remove(path);
  auto o = quickOptions("mixer");
  o.use_db = true;
  o.db_path = path;
  formats::Profile first = profiler::profileModel(o);
  // A setting that shapes only the report (not any measurement) keeps the finished profile
  // from being reused, but every measurement is.
  auto report_only = o;
  report_only.min_window_ms = o.min_window_ms * 2;
  formats::Profile second = profiler::profileModel(report_only);
  EXPECT_FALSE(first.settings.reused_profile);
  EXPECT_FALSE(second.settings.reused_profile);
  EXPECT_GT(first.settings.db_misses, 0);
  EXPECT_EQ(second.settings.db_misses, 0);
  EXPECT_GT(second.settings.db_hits, 0);
  EXPECT_EQ(second.settings.timing_db, path);
  ASSERT_EQ(second.ops.size(), first.ops.size());
  for (std::size_t i = 0; i < first.ops.size(); ++i) {
    EXPECT_EQ(second.ops[i].duration_ms, first.ops[i].duration_ms);
    EXPECT_EQ(second.ops[i].start_ms, first.ops[i].start_ms); // the stored timeline
  }
  // The same model, inputs and settings again: the finished profile itself is reused.
  formats::Profile whole = profiler::profileModel(o);
  EXPECT_TRUE(whole.settings.reused_profile);
  EXPECT_EQ(whole.settings.db_misses, 0);
  EXPECT_EQ(whole.settings.db_hits, first.settings.db_hits + first.settings.db_misses);
  EXPECT_EQ(formats::toJson(whole)["records"], formats::toJson(first)["records"]);
  EXPECT_EQ(formats::toJson(whole)["gpu_idle_events"], formats::toJson(first)["gpu_idle_events"]);
  // Other inputs, or a trace (which needs the timeline run), profile again.
  auto other_inputs = o;
  other_inputs.seed = o.seed + 1;
  EXPECT_FALSE(profiler::profileModel(other_inputs).settings.reused_profile);
  auto traced = o;
  traced.trace_path = tempPath("reuse.trace.json");
  EXPECT_FALSE(profiler::profileModel(traced).settings.reused_profile);
  std::filesystem::remove(traced.trace_path);
  // Reused measurements are exactly the stored ones: cached runs agree to the bit (as
  // written: the reused finished profile went through its JSON form).
  formats::Profile again = profiler::profileModel(report_only);
  EXPECT_TRUE(again.settings.reused_profile);
  EXPECT_EQ(formats::toJson(again)["ops"], formats::toJson(second)["ops"]);
  EXPECT_EQ(formats::toJson(again)["conversion_cost_table"],
            formats::toJson(second)["conversion_cost_table"]);
  // With another thread count the device fingerprint differs: nothing is reused from above.
  // (One below or above the count it ran at: xprof never runs above the CPUs it may use, and
  // torch 2.x starts at all of them.)
  const int threads = at::get_num_threads();
  auto other = o;
  other.threads = threads > 1 ? threads - 1 : threads + 1;
  formats::Profile third = profiler::profileModel(other);
  at::set_num_threads(threads);
  EXPECT_EQ(third.settings.db_misses, first.settings.db_misses);
  std::filesystem::remove(path);
}

TEST(Profiler, SweepTraceAndInputFile) {
  auto o = quickOptions("mixer");
  o.sweep = true;
  o.sweep_count = 300;
  o.sweep_max_bytes = 1 << 20;
  o.repeats = 3;
  o.trace_path = tempPath("trace.json");
  formats::Profile p = profiler::profileModel(o);
  std::size_t swept = 0;
  for (const auto& c : p.conversion_cost_table)
    if (c.source == "sweep") {
      ++swept;
      EXPECT_FALSE(c.layout.isContiguous()) << c.key();
      EXPECT_GE(c.layout.bytes(), 2048) << c.key();
      EXPECT_LE(c.layout.bytes(), (1 << 20) * 5 / 4) << c.key();
      EXPECT_EQ(c.samples_ms.size(), 3u) << c.key(); // one sample in each of three passes
    }
  EXPECT_GE(swept, 290u); // 300 drawn; a few may repeat a layout the model has
  auto trace = nlohmann::json::parse(xalloc::readFile(o.trace_path));
  std::size_t op_events = 0, window_events = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") {
      op_events += e["pid"] == 1 && e["tid"] == 1;
      window_events += e["pid"] == 1 && e["tid"] == 2;
    }
  EXPECT_GT(op_events, 10u);
  EXPECT_EQ(window_events, p.gpu_idle_events.size());
  std::filesystem::remove(o.trace_path);

  // Inputs from a file saved with torch.save (here: torch::pickle_save, the same format).
  const std::string inputs = tempPath("inputs.pt");
  auto x = at::randn({8, 64, 96});
  auto bytes = torch::jit::pickle_save(c10::ivalue::Tuple::create({c10::IValue(x)}));
  xalloc::writeFileAtomic(inputs, std::string(bytes.begin(), bytes.end()));
  auto f = quickOptions("mixer");
  f.input_file = inputs;
  formats::Profile q = profiler::profileModel(f);
  EXPECT_EQ(q.settings.input_file, inputs);
  ASSERT_EQ(q.settings.inputs.size(), 1u);
  EXPECT_EQ(q.settings.inputs[0].shape, (std::vector<std::int64_t>{8, 64, 96}));
  xalloc::writeFileAtomic(inputs, "not a pickle");
  EXPECT_THROW(profiler::profileModel(f), InputError);
  std::filesystem::remove(inputs);
}
