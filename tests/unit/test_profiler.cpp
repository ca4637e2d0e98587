// profiler on the scripted samples: the interpreter reproduces the JIT's results, the profile
// records what the design promises, and profile -> cost -> schedule -> rewrite keeps outputs
// bit-identical.
#include <cmath>
#include <filesystem>
#include <limits>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "xalloc/costfit/classic.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/profiler/graph_runner.h"
#include "xalloc/profiler/inputs.h"
#include "xalloc/profiler/profiler.h"
#include "xalloc/profiler/value_compare.h"
#include "xalloc/scheduler/decide.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/model_io.h"
#include "xalloc/tspass/rewrite.h"

using namespace xalloc;

namespace {

std::string samplePath(const std::string& name) {
  return std::string(XALLOC_SAMPLES_DIR) + "/" + name + ".pt";
}

profiler::ProfileOptions quickOptions(const std::string& name) {
  profiler::ProfileOptions o;
  o.model = samplePath(name);
  o.iterations = 3;
  o.warmup = 1;
  o.repeats = 5;
  o.use_db = false; // each test measures for itself (the database has tests of its own)
  return o;
}

const formats::Op& opById(const formats::Profile& p, std::int64_t id) {
  return *p.findOp(id);
}

} // namespace

TEST(ValueCompare, BitsAndLayouts) {
  auto a = at::randn({4, 6});
  auto t = a.t().contiguous().t(); // same values, column-major strides
  EXPECT_TRUE(profiler::bitwiseEqual(c10::IValue(a), c10::IValue(t)));
  EXPECT_FALSE(profiler::sameLayout({a}, {t}));
  EXPECT_TRUE(profiler::sameLayout({a}, {a.clone()}));
  auto b = a.clone();
  b.view(-1)[5] = std::nextafter(b.view(-1)[5].item<float>(), 1e9f); // one ulp
  EXPECT_FALSE(profiler::bitwiseEqual(c10::IValue(a), c10::IValue(b)));
  EXPECT_FALSE(profiler::bitwiseEqual(c10::IValue(a), c10::IValue(a.to(at::kDouble))));
  auto nan = at::full({2}, std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(profiler::bitwiseEqual(c10::IValue(nan), c10::IValue(nan.clone())));
  auto tup = c10::ivalue::Tuple::create({c10::IValue(a), c10::IValue(int64_t{3})});
  auto tup2 = c10::ivalue::Tuple::create({c10::IValue(t), c10::IValue(int64_t{3})});
  EXPECT_TRUE(profiler::bitwiseEqual(c10::IValue(tup), c10::IValue(tup2)));
  EXPECT_FALSE(profiler::sameLayout({c10::IValue(tup)}, {c10::IValue(tup2)}));
}

class RunnerMatchesJit : public ::testing::TestWithParam<std::string> {};

TEST_P(RunnerMatchesJit, SameOutputsBitForBit) {
  auto model = tspass::loadModel(samplePath(GetParam()));
  auto specs = profiler::specFromExtraFiles(model.extra_files, model.path);
  ASSERT_FALSE(specs.empty());
  auto graph = model.module.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  tspass::GraphIndex index(*graph);
  profiler::GraphRunner runner(index);
  for (std::uint64_t seed : {0u, 1u}) {
    auto inputs = profiler::methodInputs(model.module, "forward", profiler::makeInputs(specs, seed),
                                         model.path);
    auto ours = runner.run(inputs, {}, nullptr);
    ASSERT_EQ(ours.size(), 1u);
    std::vector<c10::IValue> args(inputs.begin() + 1, inputs.end());
    c10::IValue jit = model.module.forward(args);
    EXPECT_TRUE(profiler::bitwiseEqual(ours[0], jit)) << GetParam() << " seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(Samples, RunnerMatchesJit,
                         ::testing::Values("minigpt", "mixer", "redundant", "control"));

TEST(Profiler, MixerRecordsTransposedValueAndMeasuresBothConsumers) {
  formats::Profile p = profiler::profileModel(quickOptions("mixer"));
  EXPECT_EQ(p.model.format, "torchscript");
  EXPECT_EQ(p.model.sha256.size(), 64u);
  EXPECT_GT(p.device.copy_bandwidth_gbps, 0.0);
  // y = self.norm(x).transpose(1, 2): [8, 96, 64], read by token_fc1 and gate.
  const formats::Record* y = nullptr;
  for (const auto& r : p.records)
    if (r.producer_op && opById(p, *r.producer_op).kind == "aten::transpose" &&
        r.layout.sizes == std::vector<std::int64_t>{8, 96, 64})
      y = &r;
  ASSERT_NE(y, nullptr);
  EXPECT_FALSE(y->contiguous);
  EXPECT_EQ(y->layout.strides, (std::vector<std::int64_t>{64 * 96, 1, 96}));
  EXPECT_EQ(y->view_chain, std::vector<std::string>{"aten::transpose"});
  EXPECT_EQ(y->bytes, 8 * 96 * 64 * 4);
  ASSERT_EQ(y->consumers.size(), 2u);
  for (const auto& c : y->consumers) {
    EXPECT_EQ(opById(p, c.op_id).kind, "aten::linear");
    EXPECT_TRUE(c.measured) << c.note;
    ASSERT_TRUE(c.time_contiguous_ms.has_value());
    EXPECT_GT(c.time_as_is_ms, 0.0);
    EXPECT_GE(y->last_use, c.op_id);
  }
  EXPECT_EQ(opById(p, *y->producer_op).anchor.expr, "self.norm(x).transpose(1, 2)");
  bool measured = false;
  for (const auto& c : p.conversion_cost_table)
    measured |= c.key() == y->layout.key() && c.median_ms > 0 && c.samples_ms.size() == 5;
  EXPECT_TRUE(measured);
  // Ops are numbered densely in execution order, with durations.
  for (std::size_t i = 0; i < p.ops.size(); ++i)
    EXPECT_EQ(p.ops[i].id, static_cast<std::int64_t>(i));
  // And the document validates against its own reader.
  EXPECT_NO_THROW(formats::profileFromJson(formats::toJson(p), "p.json"));
}

TEST(Profiler, ViewRefusesANonContiguousInputAndLoopValuesAreMarked) {
  formats::Profile p = profiler::profileModel(quickOptions("redundant"));
  bool found_view = false;
  for (const auto& r : p.records)
    for (const auto& c : r.consumers)
      if (opById(p, c.op_id).kind == "aten::view" && r.producer_op &&
          opById(p, *r.producer_op).kind == "aten::contiguous") {
        EXPECT_FALSE(c.accepts_noncontiguous);
        found_view = true;
      }
  EXPECT_TRUE(found_view);

  formats::Profile loop = profiler::profileModel(quickOptions("control"));
  bool carried = false;
  for (const auto& r : loop.records)
    if (r.origin == "loop-carried") {
      carried = true;
      EXPECT_TRUE(r.in_loop);
    }
  EXPECT_TRUE(carried);
}

TEST(Profiler, BadInputsAreReportedClearly) {
  auto o = quickOptions("does-not-exist");
  EXPECT_THROW(profiler::profileModel(o), InputError);
  o = quickOptions("mixer");
  o.inputs.push_back({"x", {3, 3}, "float32", std::nullopt, std::nullopt});
  try {
    profiler::profileModel(o); // wrong shape for the model
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(e.message().find("failed on the example inputs"), std::string::npos) << e.message();
  }
  o = quickOptions("mixer");
  o.method = "nope";
  EXPECT_THROW(profiler::profileModel(o), InputError);
  EXPECT_THROW(profiler::parseShape("4xq", "--input-shape"), InputError);
  EXPECT_EQ(profiler::parseShape("4x64", "--input-shape"), (std::vector<std::int64_t>{4, 64}));
}

// Every site the profile shows could be converted without changing results, forced to `sync`
// (so the test does not depend on timings): the rewrite applies them all and stays bit-identical.
TEST(Pipeline, ForcedConversionsOnRealModelsStayBitIdentical) {
  for (const char* name : {"mixer", "minigpt"}) {
    formats::Profile p = profiler::profileModel(quickOptions(name));
    formats::Schedule s = scheduler::makeSchedule(p, costfit::fitCost(p));
    std::size_t forced = 0;
    for (auto& d : s.decisions) {
      if (d.action != formats::Action::None || d.input_anchor || d.consumers.empty())
        continue; // remove sites and sites without convertible consumers stay as decided
      d.action = formats::Action::Sync;
      ++forced;
    }
    ASSERT_GT(s.count(formats::Action::Sync), 0)
        << name << ": no site to convert (" << forced << " forced)";
    auto model = tspass::loadModel(samplePath(name));
    auto graph = tspass::inlineMethod(model.module, "forward");
    auto report = tspass::applySchedule(graph, s);
    EXPECT_EQ(
        report.count(tspass::ApplyStatus::Applied),
        static_cast<std::size_t>(s.count(formats::Action::Sync) + s.count(formats::Action::Remove)))
        << name;
    EXPECT_EQ(report.count(tspass::ApplyStatus::Skipped), 0u) << name;
    auto fresh = tspass::loadModel(samplePath(name));
    auto specs = profiler::specFromExtraFiles(fresh.extra_files, fresh.path);
    for (std::uint64_t seed : {3u, 4u}) {
      auto a = model.module.forward(profiler::makeInputs(specs, seed));
      auto b = fresh.module.forward(profiler::makeInputs(specs, seed));
      EXPECT_TRUE(profiler::bitwiseEqual(a, b)) << name << " seed " << seed;
    }
  }
}
