// tspass on small graphs built in C++ (Module::define): anchors, the sync and remove
// edits, idempotence, safety refusals, and conversions whose consumers sit in nested blocks.
// Constant tensors and conversions fused into producers: test_tspass_constants.cpp.
#include <cstring>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/constants.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/linear.h"
#include "xalloc/tspass/producer_fusion.h"
#include "xalloc/tspass/rewrite.h"
#include "xalloc/tspass/source_info.h"

#include "graph_lookup.h"

using namespace xalloc;
using namespace xalloc::tspass;
using namespace xalloc::tspass::testing;
using formats::Action;

namespace {

const char* kTwoConsumers = R"JIT(
def forward(self, x):
    y = x.transpose(0, 1)
    a = torch.mm(y, x)
    b = torch.relu(y)
    return a + b
)JIT";

} // namespace

TEST(TorchScriptPass, AnchorsNameFunctionExpressionAndOrdinal) {
  auto m = makeModule(R"JIT(
def forward(self, x):
    a = x.transpose(0, 1)
    b = x.transpose(0, 1)
    return a + b
)JIT");
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  auto t0 = opOf(index, c10::aten::transpose, 0), t1 = opOf(index, c10::aten::transpose, 1);
  ASSERT_GE(t0, 0);
  ASSERT_GE(t1, 0);
  const auto& a0 = index.anchor(t0);
  EXPECT_EQ(a0.function, "forward");
  EXPECT_EQ(a0.expr, "x.transpose(0, 1)");
  EXPECT_EQ(a0.op, "aten::transpose");
  EXPECT_EQ(a0.ordinal, 0);
  EXPECT_EQ(index.anchor(t1).ordinal, 1);
  EXPECT_EQ(a0.line + 1, index.anchor(t1).line);
  EXPECT_EQ(index.findByAnchor(index.anchor(t1)).front(),
            index.ops()[static_cast<std::size_t>(t1)]);
}

// Sources come and go with their modules; a new one may sit where a freed one was. Anchors
// must always come from the node's own source text.
TEST(TorchScriptPass, AnchorsNeverReadAnotherModulesSource) {
  const std::vector<std::pair<std::string, std::string>> models = {
      {"def forward(self, x):\n    return x.transpose(0, 1).relu()\n", "x.transpose(0, 1)"},
      {"def forward(self, y):\n    return torch.sigmoid(y.permute(1, 0))\n", "y.permute(1, 0)"},
      {"def forward(self, z):\n  w = z.t()\n  return w + 1\n", "z.t()"}};
  for (int round = 0; round < 50; ++round) {
    const auto& [src, expr] = models[static_cast<std::size_t>(round) % models.size()];
    auto m = makeModule(src);
    auto g = inlineMethod(m, "forward");
    GraphIndex index(*g);
    bool found = false;
    for (std::size_t i = 0; i < index.ops().size(); ++i)
      found |= index.anchor(static_cast<std::int64_t>(i)).expr == expr;
    ASSERT_TRUE(found) << "round " << round << ": no anchor reads `" << expr << "`";
  }
}

TEST(TorchScriptPass, ExpressionsAreCompletedFromTheSource) {
  using xalloc::tspass::detail::completeExpression;
  std::string src = "y = self.c_attn(x).split(self.n_embd, dim=2) + 1\n";
  // TorchScript ranges can stop inside a name or before the arguments of a call.
  EXPECT_EQ(completeExpression(src, 4, 22), "self.c_attn(x).split(self.n_embd, dim=2)");
  EXPECT_EQ(completeExpression(src, 4, 15), "self.c_attn(x)");
  std::string paren = "return x + (h * g).transpose(1, 2)\n";
  EXPECT_EQ(completeExpression(paren, paren.find('h'), paren.find("transpose") + 9),
            "(h * g).transpose(1, 2)");
  std::string f = "class A(nn.Module):\n    def forward(self, x):\n        return x\n";
  EXPECT_EQ(xalloc::tspass::detail::enclosingPythonFunction(f, f.find("return")), "A.forward");
}

TEST(TorchScriptPass, ScopesNameModulesNotSelfCalls) {
  // nn.Conv2d's forward calls self._conv_forward: a call on the same module adds no level.
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module conv("Conv", cu, /*shouldMangle=*/true);
  conv.define("def forward(self, x):\n    return self._impl(x)\n"
              "def _impl(self, x):\n    return x * 2\n");
  torch::jit::Module top("Top", cu, /*shouldMangle=*/true);
  top.register_module("conv", conv);
  top.define("def forward(self, x):\n    return self.conv.forward(x) + 1\n");
  auto g = inlineMethod(top, "forward");
  GraphIndex index(*g);
  std::map<std::string, std::string> scopes;
  for (std::size_t i = 0; i < index.ops().size(); ++i)
    scopes[index.ops()[i]->kind().toQualString()] = index.scope(static_cast<std::int64_t>(i));
  EXPECT_EQ(scopes["aten::mul"], "conv");
  EXPECT_EQ(scopes["aten::add"], "");
}

TEST(TorchScriptPass, TracedStacksAreFramesNotExpressions) {
  using xalloc::tspass::detail::tracedFrameFunction;
  const std::string stack = "/src/model.py(63): forward\n"
                            "/usr/lib/python3/dist-packages/torch/nn/modules/module.py(1182): "
                            "_slow_forward\n<ipython-input-3-9f2>(95): <module>\n";
  EXPECT_EQ(tracedFrameFunction(stack, 0), "forward");
  EXPECT_EQ(tracedFrameFunction(stack, stack.find("<ipython")), "<module>");
  // Python source is never all frames, even where one of its lines looks like one.
  const std::string code = "def f(x):\n    if g(1): pass\n    return x\n";
  EXPECT_EQ(tracedFrameFunction(code, code.find("g(1)")), "");
  EXPECT_EQ(tracedFrameFunction("g(1): pass\n", 0), "");
  EXPECT_EQ(tracedFrameFunction("<stdin>(1): forward", 0), "forward");
  EXPECT_EQ(tracedFrameFunction("model.py(63): forward", 0), "forward");
  EXPECT_EQ(tracedFrameFunction("model.py(): forward", 0), "");
  EXPECT_EQ(tracedFrameFunction("model.py(6): two words", 0), "");
  EXPECT_EQ(tracedFrameFunction(stack, stack.size()), "");
}

TEST(TorchScriptPass, SyncInsertsOneConversionForAllListedConsumers) {
  auto m = makeModule(kTwoConsumers);
  auto reference = makeModule(kTwoConsumers);
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  auto s = scheduleFor(index);
  auto t = opOf(index, c10::aten::transpose);
  s.decisions.push_back(
      syncOf(index, t, {opOf(index, c10::aten::mm), opOf(index, c10::aten::relu)}));

  auto report = applySchedule(g, s);
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.results[0].status, ApplyStatus::Applied) << report.results[0].message;
  auto convs = nodesOf(*g, c10::aten::contiguous);
  ASSERT_EQ(convs.size(), 1u);
  EXPECT_EQ(convs[0]->input(0)->node()->kind(), c10::aten::transpose);
  EXPECT_EQ(nodesOf(*g, c10::aten::mm)[0]->input(0), convs[0]->output());
  EXPECT_EQ(nodesOf(*g, c10::aten::relu)[0]->input(0), convs[0]->output());
  EXPECT_TRUE(convs[0]->isBefore(nodesOf(*g, c10::aten::mm)[0]));

  // Same results, bit for bit.
  auto x = at::randn({16, 16});
  EXPECT_TRUE(at::equal(m.forward({x}).toTensor(), reference.forward({x}).toTensor()));

  // Idempotent: a second application changes nothing.
  const std::string once = graphText(*g);
  auto again = applySchedule(g, s);
  EXPECT_EQ(again.results[0].status, ApplyStatus::AlreadyApplied);
  EXPECT_FALSE(again.changed());
  EXPECT_EQ(graphText(*g), once);
}

TEST(TorchScriptPass, SyncRewiresOnlyTheListedConsumers) {
  auto m = makeModule(kTwoConsumers);
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  auto s = scheduleFor(index);
  s.decisions.push_back(
      syncOf(index, opOf(index, c10::aten::transpose), {opOf(index, c10::aten::mm)}));
  ASSERT_TRUE(applySchedule(g, s).changed());
  auto conv = nodesOf(*g, c10::aten::contiguous).at(0);
  EXPECT_EQ(nodesOf(*g, c10::aten::mm)[0]->input(0), conv->output());
  EXPECT_EQ(nodesOf(*g, c10::aten::relu)[0]->input(0), conv->input(0));
}

TEST(TorchScriptPass, SyncBeforeConsumersInNestedBlocks) {
  const char* src = R"JIT(
def forward(self, x, flag: bool):
    y = x.transpose(0, 1)
    if flag:
        r = torch.relu(y)
    else:
        r = torch.tanh(y)
    return r + torch.mm(y, x)
)JIT";
  auto m = makeModule(src);
  auto reference = makeModule(src);
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  auto s = scheduleFor(index);
  s.decisions.push_back(syncOf(
      index, opOf(index, c10::aten::transpose),
      {opOf(index, c10::aten::relu), opOf(index, c10::aten::tanh), opOf(index, c10::aten::mm)}));
  auto report = applySchedule(g, s);
  ASSERT_EQ(report.results[0].status, ApplyStatus::Applied) << report.results[0].message;
  auto conv = nodesOf(*g, c10::aten::contiguous).at(0);
  EXPECT_EQ(conv->owningBlock(), g->block()); // lifted out of the branches
  EXPECT_TRUE(conv->isBefore(nodesOf(*g, c10::prim::If).at(0)));
  auto x = at::randn({8, 8});
  for (bool flag : {true, false})
    EXPECT_TRUE(
        at::equal(m.forward({x, flag}).toTensor(), reference.forward({x, flag}).toTensor()));
}

TEST(TorchScriptPass, RemoveDropsAConversionAndThenFindsNothing) {
  const char* src = R"JIT(
def forward(self, x):
    y = torch.relu(x)
    z = y.contiguous()
    return torch.tanh(z)
)JIT";
  auto m = makeModule(src);
  auto reference = makeModule(src);
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  auto s = scheduleFor(index);
  formats::Decision d = removeFirstConversion(index);
  d.input_anchor = index.anchor(opOf(index, c10::aten::relu));
  s.decisions.push_back(d);
  auto report = applySchedule(g, s);
  ASSERT_EQ(report.results[0].status, ApplyStatus::Applied) << report.results[0].message;
  EXPECT_TRUE(nodesOf(*g, c10::aten::contiguous).empty());
  EXPECT_EQ(nodesOf(*g, c10::aten::tanh)[0]->input(0)->node()->kind(), c10::aten::relu);
  auto x = at::randn({4, 4});
  EXPECT_TRUE(at::equal(m.forward({x}).toTensor(), reference.forward({x}).toTensor()));
  auto again = applySchedule(g, s);
  EXPECT_EQ(again.results[0].status, ApplyStatus::NotFound);
  EXPECT_FALSE(again.changed());
}

TEST(TorchScriptPass, EditsThatCouldChangeResultsAreSkipped) {
  // y is written in place after the consumers read it: a copy would not see the write.
  auto m = makeModule(R"JIT(
def forward(self, x):
    y = x.transpose(0, 1)
    a = torch.mm(y, x)
    y.add_(1.0)
    return a + y
)JIT");
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  auto s = scheduleFor(index);
  s.decisions.push_back(
      syncOf(index, opOf(index, c10::aten::transpose), {opOf(index, c10::aten::mm)}));
  auto report = applySchedule(g, s);
  EXPECT_EQ(report.results[0].status, ApplyStatus::Skipped);
  EXPECT_NE(report.results[0].message.find("written in place"), std::string::npos);
  EXPECT_TRUE(nodesOf(*g, c10::aten::contiguous).empty());

  // The conversion feeds aten::view, which needs it.
  auto m2 = makeModule(R"JIT(
def forward(self, x):
    z = x.transpose(0, 1).contiguous()
    return z.view(-1)
)JIT");
  auto g2 = inlineMethod(m2, "forward");
  GraphIndex index2(*g2);
  auto s2 = scheduleFor(index2);
  s2.decisions.push_back(removeFirstConversion(index2));
  EXPECT_EQ(applySchedule(g2, s2).results[0].status, ApplyStatus::Skipped);
  EXPECT_EQ(nodesOf(*g2, c10::aten::contiguous).size(), 1u);
}

TEST(TorchScriptPass, UnknownSitesAreReportedNotGuessed) {
  auto m = makeModule(kTwoConsumers);
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  auto s = scheduleFor(index);
  auto d = syncOf(index, opOf(index, c10::aten::transpose), {opOf(index, c10::aten::mm)});
  d.anchor.expr = "x.permute(1, 0)"; // the source changed since profiling
  s.decisions.push_back(d);
  const std::string before = graphText(*g);
  auto report = applySchedule(g, s);
  EXPECT_EQ(report.results[0].status, ApplyStatus::NotFound);
  EXPECT_EQ(graphText(*g), before);
}

// The inlined graph may hold copies of a site that the saved code drops (MultiheadAttention's
// paths that never run): three per layer before, one after. The module path still carries over,
// one per layer in order (nn.TransformerEncoder's out_proj rows had none in --explain).
TEST(TorchScriptPass, ScopesCarryOverCopiesTheSavedCodeDrops) {
  auto source = std::make_shared<torch::jit::Source>("y = linear(x)\n", "m.py", 1);
  const torch::jit::SourceRange range(source, 4, 13);
  auto build = [&](const std::vector<std::string>& scopes) {
    auto g = std::make_shared<torch::jit::Graph>();
    torch::jit::Value* x = g->addInput("x");
    const auto root = c10::make_intrusive<torch::jit::Scope>();
    for (const auto& name : scopes) {
      torch::jit::Node* n = g->insertNode(g->create(c10::aten::relu, {x}));
      n->setSourceRange(range);
      if (!name.empty())
        n->setScope(root->push(c10::Symbol::scope(name)));
    }
    return g;
  };
  const auto from = build({"0.attn", "0.attn", "0.attn", "1.attn", "1.attn", "1.attn"});
  const auto to = build({"", ""});
  carryScopes(*from, *to);
  std::vector<std::string> got;
  for (const torch::jit::Node* n : to->nodes())
    got.push_back(moduleScope(n));
  EXPECT_EQ(got, (std::vector<std::string>{"0.attn", "1.attn"}));
  // Names that do not line up either way are left out, not guessed.
  const auto three = build({"", "", ""});
  carryScopes(*from, *three);
  for (const torch::jit::Node* n : three->nodes())
    EXPECT_EQ(moduleScope(n), "");
}
