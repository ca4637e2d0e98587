// profiler on the scripted samples: the interpreter reproduces the JIT's results, the profile
// records what the design promises, and profile -> cost -> schedule -> rewrite keeps outputs
// bit-identical.
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <unistd.h>

#include "xalloc/costfit/cost_model.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"
#include "xalloc/io.h"
#include "xalloc/profiler/device_info.h"
#include "xalloc/profiler/graph_runner.h"
#include "xalloc/profiler/idle_windows.h"
#include "xalloc/profiler/profiler.h"
#include "xalloc/profiler/timing_db.h"
#include "xalloc/scheduler/decide.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/linear.h"
#include "xalloc/tspass/model_io.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/value_compare.h"

#include "profile_samples.h"
#include "temp_path.h"

using namespace xalloc;
using xalloc::testing::quickOptions;
using xalloc::testing::samplePath;
using xalloc::testing::tempPath;

namespace {

const formats::Op& opById(const formats::Profile& p, std::int64_t id) {
  return *p.findOp(id);
}

} // namespace

class RunnerMatchesJit : public ::testing::TestWithParam<std::string> {};

TEST_P(RunnerMatchesJit, SameOutputsBitForBit) {
  auto model = tspass::loadModel(samplePath(GetParam()));
  auto specs = xalloc::tspass::specFromExtraFiles(model.extra_files, model.path);
  ASSERT_FALSE(specs.empty());
  auto graph = model.module.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  tspass::GraphIndex index(*graph);
  profiler::GraphRunner runner(index);
  for (std::uint64_t seed : {0u, 1u}) {
    auto inputs = xalloc::tspass::methodInputs(model.module, "forward",
                                               xalloc::tspass::makeInputs(specs, seed), model.path);
    const bool grad = c10::GradMode::is_enabled();
    auto ours = runner.run(inputs, {}, nullptr);
    EXPECT_EQ(c10::GradMode::is_enabled(), grad) << "a with-block left grad mode switched";
    ASSERT_EQ(ours.size(), 1u);
    std::vector<c10::IValue> args(inputs.begin() + 1, inputs.end());
    c10::IValue jit = model.module.forward(args);
    EXPECT_TRUE(xalloc::tspass::bitwiseEqual(ours[0], jit)) << GetParam() << " seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(Samples, RunnerMatchesJit,
                         ::testing::Values("minigpt", "mixer", "redundant", "control"));

TEST(Profiler, MixerRecordsTransposedValueAndMeasuresBothConsumers) {
  formats::Profile p = profiler::profileModel(quickOptions("mixer"));
  EXPECT_EQ(p.model.format, formats::ModelFormat::TorchScript);
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
  EXPECT_FALSE(y->module_storage); // an activation
  ASSERT_EQ(y->consumers.size(), 2u);
  // Ops know their module, though the saved code xprof indexes forgets inlined call stacks
  // (tspass::canonicalize carries them over); a linear's exposed ops belong to the linear.
  std::set<std::string> consumer_scopes;
  for (const auto& c : y->consumers)
    consumer_scopes.insert(opById(p, c.op_id).scope);
  EXPECT_EQ(consumer_scopes, (std::set<std::string>{"token_fc1", "gate"}));
  EXPECT_EQ(opById(p, *y->producer_op).scope, "");
  for (const auto& c : y->consumers) {
    // The linears, exposed (tspass/linear.h): y is read by the matmul of each.
    EXPECT_EQ(opById(p, c.op_id).kind, "aten::matmul");
    EXPECT_EQ(opById(p, c.op_id).anchor.expr, "F.linear(input, self.weight, self.bias)");
    EXPECT_TRUE(c.measured) << c.note;
    EXPECT_TRUE(c.identical_output) << c.note;
    ASSERT_TRUE(c.time_contiguous_ms.has_value());
    EXPECT_GT(c.time_as_is_ms, 0.0);
    EXPECT_GE(y->last_use, c.op_id);
  }
  EXPECT_EQ(opById(p, *y->producer_op).anchor.expr, "self.norm(x).transpose(1, 2)");
  // The weights the linears read transposed: token_fc1 [128, 64] read as [64, 128] with
  // strides (1, 64), token_fc2 [64, 128] as [128, 64], gate [64, 64]; each has one consumer,
  // its matmul, measured as the whole linear against the exposed ops with the weight converted.
  std::vector<std::vector<std::int64_t>> transposed;
  for (const auto& r : p.records) {
    if (!r.producer_op || opById(p, *r.producer_op).kind != "aten::t")
      continue;
    EXPECT_FALSE(r.contiguous);
    EXPECT_TRUE(r.module_storage);            // a view of a weight: the module's memory
    EXPECT_EQ(r.origin, formats::Origin::Op); // an attribute the model may change: not a constant
    ASSERT_EQ(r.layout.sizes.size(), 2u);
    EXPECT_EQ(r.layout.strides, (std::vector<std::int64_t>{1, r.layout.sizes[0]}));
    transposed.push_back(r.layout.sizes);
    ASSERT_EQ(r.consumers.size(), 1u);
    const auto& c = r.consumers.front();
    EXPECT_EQ(opById(p, c.op_id).kind, "aten::matmul");
    EXPECT_TRUE(c.measured) << c.note;
    EXPECT_TRUE(c.identical_output) << c.note;
    EXPECT_GT(c.time_as_is_ms, 0.0);
    ASSERT_TRUE(c.time_contiguous_ms.has_value());
    EXPECT_GT(*c.time_contiguous_ms, 0.0);
  }
  EXPECT_EQ(transposed, (std::vector<std::vector<std::int64_t>>{{64, 128}, {128, 64}, {64, 64}}));
  bool measured = false;
  for (const auto& c : p.conversion_cost_table)
    measured |= c.key() == y->layout.key() && c.median_ms > 0 && c.samples_ms.size() >= 5 &&
                c.reference_ms.value_or(0) > 0 && c.ratio.value_or(0) > 0;
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
    if (r.origin == formats::Origin::LoopCarried) {
      carried = true;
      EXPECT_TRUE(r.in_loop);
    }
  EXPECT_TRUE(carried);
  // Ops count their runs: the loop body's three trips, one branch each way per trip (sum on
  // trips 0 and 2, amax on trip 1), the ops after the loop once.
  std::map<std::string, std::int64_t> runs;
  for (const auto& op : loop.ops)
    runs[op.kind] = std::max(runs[op.kind], op.runs);
  EXPECT_EQ(runs["aten::tanh"], 3);
  EXPECT_EQ(runs["aten::amax"], 1);
  EXPECT_EQ(runs["aten::stack"], 1);
  std::int64_t sums = 0;
  for (const auto& op : loop.ops)
    if (op.kind == "aten::sum" && op.anchor.expr == "h.sum(0)")
      sums = op.runs;
  EXPECT_EQ(sums, 2);
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
  EXPECT_THROW(xalloc::tspass::parseShape("4xq", "--input-shape"), InputError);
  EXPECT_EQ(xalloc::tspass::parseShape("4x64", "--input-shape"),
            (std::vector<std::int64_t>{4, 64}));
}

// aten::format takes its input count on the stack, as the JIT interpreter gives it; and when a
// model fails, the error names the op and where it is.
TEST(Profiler, RunsVarargOpsAndNamesTheOpThatFails) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("xalloc-vararg-" + std::to_string(::getpid()) + ".pt"))
                               .string();
  torch::jit::Module m("m");
  m.define(R"JIT(
def forward(self, x):
    why = "rows {} cols {}".format(x.size(0), x.size(1))
    if len(why) > 1000:
        x = x * 2.0
    return torch.mm(x.t(), x)
)JIT");
  m.save(path);
  auto o = quickOptions("mixer");
  o.model = path;
  o.inputs.push_back({"x", {6, 4}, "float32", std::nullopt, std::nullopt});
  formats::Profile p = profiler::profileModel(o);
  bool formatted = false;
  for (const auto& op : p.ops)
    formatted |= op.kind == "aten::format";
  EXPECT_TRUE(formatted);
  m.define(R"JIT(
def other(self, x):
    return torch.mm(x, x)
)JIT");
  m.save(path);
  o.method = "other";
  try {
    profiler::profileModel(o); // [6, 4] x [6, 4]
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(e.message().find("aten::mm at "), std::string::npos) << e.message();
  }
  std::filesystem::remove(path);
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
    const auto exposed = tspass::exposeLinearWeights(*graph); // as xrewrite does
    tspass::ApplyOptions options;
    options.module = &model.module;
    auto report = tspass::applySchedule(graph, s, options);
    tspass::restoreLinears(exposed);
    std::string statuses;
    for (const auto& r : report.results)
      statuses += std::string("\n  ") + tspass::applyStatusName(r.status) + ": " + r.message;
    EXPECT_EQ(
        report.count(tspass::ApplyStatus::Applied),
        static_cast<std::size_t>(s.count(formats::Action::Sync) + s.count(formats::Action::Remove)))
        << name << statuses;
    EXPECT_EQ(report.count(tspass::ApplyStatus::Skipped), 0u) << name;
    auto fresh = tspass::loadModel(samplePath(name));
    auto specs = xalloc::tspass::specFromExtraFiles(fresh.extra_files, fresh.path);
    for (std::uint64_t seed : {3u, 4u}) {
      auto a = model.module.forward(xalloc::tspass::makeInputs(specs, seed));
      auto b = fresh.module.forward(xalloc::tspass::makeInputs(specs, seed));
      EXPECT_TRUE(xalloc::tspass::bitwiseEqual(a, b)) << name << " seed " << seed;
    }
  }
}

namespace {

const formats::Record* findRecord(const formats::Profile& p, const std::string& producer_kind,
                                  const std::vector<std::int64_t>& sizes) {
  for (const auto& r : p.records)
    if (r.producer_op && p.findOp(*r.producer_op)->kind == producer_kind && r.layout.sizes == sizes)
      return &r;
  return nullptr;
}

} // namespace

// Layouts in the profile agree with the same views built directly with ATen in the test.
TEST(Profiler, RecordedLayoutsMatchIndependentlyComputedViews) {
  formats::Profile cnn = profiler::profileModel(quickOptions("shufflecnn"));
  auto x = at::empty({4, 24, 32, 32});
  auto half = x.chunk(2, 1)[0];
  const formats::Record* x1 = findRecord(cnn, "prim::ListUnpack", half.sizes().vec());
  ASSERT_NE(x1, nullptr);
  EXPECT_EQ(x1->layout.strides, half.strides().vec());
  EXPECT_FALSE(x1->contiguous);
  EXPECT_EQ(x1->view_chain, std::vector<std::string>{"aten::chunk"});
  auto shuffled = x.view({4, 2, 12, 32, 32}).transpose(1, 2);
  const formats::Record* sh = findRecord(cnn, "aten::transpose", shuffled.sizes().vec());
  ASSERT_NE(sh, nullptr);
  EXPECT_EQ(sh->layout.strides, shuffled.strides().vec());
  auto nhwc = x.permute({0, 2, 3, 1});
  const formats::Record* perm = findRecord(cnn, "aten::permute", nhwc.sizes().vec());
  ASSERT_NE(perm, nullptr);
  EXPECT_EQ(perm->layout.strides, nhwc.strides().vec());

  formats::Profile att = profiler::profileModel(quickOptions("attention"));
  auto tokens = at::empty({4, 64, 8, 8}).flatten(2).transpose(1, 2);
  const formats::Record* t = findRecord(att, "aten::transpose", tokens.sizes().vec());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->layout.strides, tokens.strides().vec());
  EXPECT_EQ(t->view_chain, (std::vector<std::string>{"aten::flatten", "aten::transpose"}));
}

// Every non-contiguous value's consumers that can be re-run carry both timings, lists included
// (torch.cat reads the chunk through a ListConstruct), and single-threaded phases show up as
// idle windows.
TEST(Profiler, EveryConsumerOfANonContiguousValueIsTimedBothWays) {
  for (const char* name : {"minigpt", "shufflecnn", "attention"}) {
    formats::Profile p = profiler::profileModel(quickOptions(name));
    std::size_t timed = 0;
    for (const auto& r : p.records) {
      if (r.contiguous)
        continue;
      for (const auto& c : r.consumers) {
        if (!c.note.empty() && c.note.rfind("measured through", 0) != 0)
          continue; // not executed, metadata only, or an op that writes its inputs
        EXPECT_TRUE(c.measured) << name << " value %" << r.name << " op " << c.op_id;
        EXPECT_TRUE(c.time_contiguous_ms.has_value()) << name << " value %" << r.name;
        EXPECT_TRUE(c.delta_ms.has_value());
        ++timed;
      }
    }
    EXPECT_GT(timed, 0u) << name;
    if (at::get_num_threads() < xalloc::availableCpus()) {
      ASSERT_FALSE(p.gpu_idle_events.empty()) << name;
      for (const auto& w : p.gpu_idle_events) {
        EXPECT_GT(w.spare_cores, 0.0);
        EXPECT_NE(p.findOp(w.after_op_id), nullptr);
        EXPECT_NE(p.findOp(w.before_op_id), nullptr);
      }
    }
  }
  formats::Profile cnn = profiler::profileModel(quickOptions("shufflecnn"));
  bool through_list = false;
  for (const auto& r : cnn.records)
    for (const auto& c : r.consumers)
      through_list |= c.measured && c.note == "measured through prim::ListConstruct";
  EXPECT_TRUE(through_list);
}

// Three ops on two cores: a single-threaded op (one core spare), a 0.5 ms gap of host work, a
// parallel op (nothing spare), then a last op. Windows are only ever between two ops.

// A non-contiguous value made by a pointwise op is also timed made row-major by the op itself
// (its out variant), against the op and a conversion; one made by a view is not.
TEST(Profiler, APointwiseProducerIsTimedWritingRowMajorItself) {
  const std::string path = tempPath("fusion.pt");
  torch::jit::Module m("m");
  m.define(R"JIT(
def forward(self, x, k):
    b = x.size(0)
    q = x.view(b, 64, 4, 16).transpose(1, 2) * 0.125
    t = x.transpose(1, 2)
    return torch.matmul(q, k), torch.matmul(t, x)
)JIT");
  m.save(path);
  auto o = quickOptions("mixer");
  o.model = path;
  o.inputs.push_back({"x", {2, 64, 64}, "float32", std::nullopt, std::nullopt});
  o.inputs.push_back({"k", {2, 4, 16, 64}, "float32", std::nullopt, std::nullopt});
  formats::Profile p = profiler::profileModel(o);
  const formats::Record* q = nullptr;
  const formats::Record* t = nullptr;
  for (const auto& r : p.records) {
    if (!r.producer_op)
      continue;
    const std::string& kind = opById(p, *r.producer_op).kind;
    if (kind == "aten::mul")
      q = &r;
    else if (kind == "aten::transpose" && r.layout.sizes.size() == 3)
      t = &r;
  }
  ASSERT_NE(q, nullptr);
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(q->contiguous);
  ASSERT_TRUE(q->producer_fusion.has_value());
  const formats::ProducerFusion& f = *q->producer_fusion;
  EXPECT_EQ(f.op, "aten::mul.Scalar_out");
  EXPECT_EQ(f.template_input, 0); // the transposed view, with the output's sizes
  EXPECT_TRUE(f.identical_output);
  EXPECT_GT(f.separate_ms, 0.0);
  EXPECT_GT(f.fused_ms, 0.0);
  EXPECT_FALSE(t->producer_fusion.has_value()); // a view writes nothing
  EXPECT_NO_THROW(formats::profileFromJson(formats::toJson(p), "p.json"));
  std::filesystem::remove(path);
}
