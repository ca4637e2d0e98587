// MutationInfo: which values something may write, on small graphs built in C++
// (Module::define): module buffers and tied weights, assigned attributes, containers, loops.
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/mutation.h"

#include "graph_lookup.h"

using namespace xalloc::tspass;
using namespace xalloc::tspass::testing;

TEST(MutationInfo, WritesToModuleBuffersDoNotBlockUnrelatedValues) {
  // Like BatchNorm in training: a buffer is updated in place, and activations go through lists.
  torch::jit::Module m("m");
  m.register_buffer("counter", at::zeros({1}));
  m.define(R"JIT(
def forward(self, x, training: bool):
    if training:
        self.counter.add_(1.0)
    y = x.transpose(0, 1)
    parts = [y, x]
    z = torch.cat(parts, 0)
    w = torch.mm(y, x)
    w.mul_(2.0)
    return z.sum() + w
)JIT");
  auto g = inlineMethod(m, "forward");
  MutationInfo info(g);
  GraphIndex index(*g);
  const auto* y = outputOf(index, c10::aten::transpose);
  const auto* w = outputOf(index, c10::aten::mm);
  const auto* x = g->inputs()[1];
  EXPECT_FALSE(info.hasWriters(y)) << "the buffer write cannot reach a view of the input";
  EXPECT_FALSE(info.hasWriters(x));
  EXPECT_TRUE(info.hasWriters(w)) << "w.mul_ writes w";
  EXPECT_NE(info.memoryRoots(y), info.memoryRoots(w));
  EXPECT_EQ(info.memoryRoots(y), info.memoryRoots(x)); // a view shares its base's allocation
}

// Given the module, each tensor attribute is its own allocation: a buffer updated in place
// (BatchNorm's statistics in training) no longer counts as a write to every parameter, while
// attributes that share a storage (tied weights) still alias each other.
TEST(MutationInfo, AttributesAliasOnlyWhatSharesTheirStorage) {
  torch::jit::Module m("m");
  at::Tensor w = at::randn({4, 4});
  m.register_parameter("w", w, false);
  m.register_parameter("tied", w, false); // the same tensor under another name
  m.register_parameter("v", at::randn({4, 4}), false);
  m.register_buffer("counter", at::zeros({1}));
  m.define(R"JIT(
def forward(self, x, training: bool):
    if training:
        self.counter.add_(1.0)
        self.tied.mul_(0.5)
    a = torch.mm(x, self.w.t())
    return torch.mm(a, self.v.t())
)JIT");
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  const auto* wt = outputOf(index, c10::aten::t, 0);
  const auto* vt = outputOf(index, c10::aten::t, 1);
  MutationInfo coarse(g);
  EXPECT_TRUE(coarse.hasWriters(vt)) << "without the module, all state is one allocation";
  MutationInfo fine(g, &m);
  EXPECT_FALSE(fine.hasWriters(vt)) << "v shares a storage with neither counter nor tied";
  EXPECT_TRUE(fine.hasWriters(wt)) << "tied.mul_ writes w's storage";
  EXPECT_NE(fine.memoryRoots(wt), fine.memoryRoots(vt));
}

TEST(MutationInfo, AssignedAttributesFallBackToOneAllocation) {
  torch::jit::Module m("m");
  m.register_parameter("v", at::randn({4, 4}), false);
  m.register_buffer("state", at::zeros({4, 4}));
  m.define(R"JIT(
def forward(self, x):
    self.state = self.v
    self.state.add_(1.0)
    return torch.mm(x, self.v.t())
)JIT");
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  const auto* vt = outputOf(index, c10::aten::t);
  MutationInfo info(g, &m);
  EXPECT_TRUE(info.hasWriters(vt)) << "after self.state = self.v, state's write reaches v";

  // Assigning a flag (torchvision's detection models set `self._has_warned = True`) moves no
  // storage: attributes keep their own allocations.
  torch::jit::Module f("f");
  f.register_parameter("v", at::randn({4, 4}), false);
  f.register_buffer("counter", at::zeros({1}));
  f.register_attribute("warned", c10::BoolType::get(), false);
  f.define(R"JIT(
def forward(self, x, training: bool):
    if not self.warned:
        self.warned = True
    if training:
        self.counter.add_(1.0)
    return torch.mm(x, self.v.t())
)JIT");
  auto gf = inlineMethod(f, "forward");
  GraphIndex fi(*gf);
  const auto* ft = outputOf(fi, c10::aten::t);
  EXPECT_FALSE(MutationInfo(gf, &f).hasWriters(ft)) << "counter.add_ cannot reach v";
}

// An attribute the graph assigns holds what the graph assigns it, what it held at load time, or
// what an earlier run left there. torchvision's AnchorGenerator assigns its list of cell anchors
// on each call; that used to make the attribute, every list it entered (the alias analysis joins
// all lists of tensors) and every tensor read back out of a list unknown, so any write anywhere
// (BatchNorm's counter in a training branch) blocked every such tensor in RetinaNet's head.
TEST(MutationInfo, AssignedAttributesHoldWhatTheGraphAssignsThem) {
  torch::jit::Module m("m");
  m.register_buffer("counter", at::zeros({1}));
  c10::impl::GenericList anchors(c10::TensorType::get());
  anchors.push_back(at::randn({4, 4}));
  m.register_attribute("anchors", c10::ListType::ofTensors(), anchors);
  m.define(R"JIT(
def forward(self, x, training: bool):
    self.anchors = [a.to(dtype=x.dtype) for a in self.anchors]
    if training:
        self.counter.add_(1.0)
    parts = [x.t(), self.anchors[0]]
    y = parts[0]
    w = torch.mm(x, x)
    w.relu_()
    return torch.mm(y, x) + w
)JIT");
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  MutationInfo info(g, &m);
  const auto* y = outputOf(index, c10::aten::mm, 1)->node()->input(0); // parts[0]
  ASSERT_EQ(y->node()->kind(), c10::aten::__getitem__);
  EXPECT_FALSE(info.hasWriters(y)) << "neither counter.add_ nor w.relu_ can reach x.t()";
  EXPECT_TRUE(info.hasWriters(outputOf(index, c10::aten::mm, 0))) << "w.relu_ writes w";

  // What an earlier run assigned: a view of the input the caller passes again, or one tensor
  // under two names.
  torch::jit::Module e("e");
  e.register_buffer("a", at::zeros({4, 4}));
  e.register_buffer("b", at::zeros({4, 4}));
  e.register_buffer("c", at::zeros({4, 4}));
  e.define(R"JIT(
def forward(self, x):
    u = self.a.t()
    self.b.mul_(2.0)
    self.c.add_(1.0)
    y = torch.mm(x, x)
    self.a = y
    self.b = y
    self.c = x.t()
    return torch.mm(u, x)
)JIT");
  auto ge = inlineMethod(e, "forward");
  GraphIndex ei(*ge);
  MutationInfo einfo(ge, &e);
  EXPECT_TRUE(einfo.hasWriters(outputOf(ei, c10::aten::t, 0)))
      << "self.a may be the y an earlier run also gave self.b, which b.mul_ writes";
  EXPECT_TRUE(einfo.hasWriters(ge->inputs()[1])) << "self.c may be an earlier x.t(): the same x";
}

// A tensor stored into a container in place (`lst.append(y)`, `d[k] = y`) and read back out of
// it is the same tensor: a write through the copy read back is a write to y. (Only what a list
// was made from used to count, so a conversion of y placed before that write copied stale data.)
TEST(MutationInfo, WritesThroughAContainerReachWhatWasStoredInIt) {
  for (const char* store : {"lst.append(y)", "d[\"k\"] = y"}) {
    const bool list = store[0] == 'l';
    torch::jit::Module m("m");
    m.define(std::string(R"JIT(
def forward(self, x):
    y = x.t()
    lst: List[Tensor] = []
    d: Dict[str, Tensor] = {}
    )JIT") + store +
             (list ? "\n    lst[0].mul_(2.0)" : "\n    d[\"k\"].mul_(2.0)") +
             R"JIT(
    z = torch.mm(x, x)
    return torch.mm(y, x) + z.t()
)JIT");
    auto g = inlineMethod(m, "forward");
    GraphIndex index(*g);
    MutationInfo info(g);
    const auto* y = outputOf(index, c10::aten::t, 0);
    const auto* z = outputOf(index, c10::aten::mm, 0);
    EXPECT_TRUE(info.hasWriters(y)) << store << ", then a write to what comes back out, writes y";
    EXPECT_FALSE(info.hasWriters(z)) << store << ": z never went in";
  }
  // Stored through an alias of the list (an If's output that may be a or b), read from a.
  torch::jit::Module m("m");
  m.define(R"JIT(
def forward(self, x, flag: bool):
    y = x.t()
    a: List[Tensor] = []
    b: List[Tensor] = []
    c = a if flag else b
    c.append(y)
    a[0].add_(1.0)
    return torch.mm(y, x)
)JIT");
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  const auto* y = outputOf(index, c10::aten::t, 0);
  EXPECT_TRUE(MutationInfo(g).hasWriters(y)) << "c may be a: a[0] may be y";
}

// A loop-carried value is its initial value in the first trip and what the body hands on after;
// the loop's output is either. A write to it reaches exactly those allocations (a weight read
// elsewhere stays unwritten), instead of everything.
TEST(MutationInfo, WritesToLoopCarriedValuesReachWhatTheyMayBe) {
  for (const bool first_trip_writes_x : {false, true}) {
    torch::jit::Module m("m");
    m.register_parameter("w", at::randn({4, 4}), false);
    m.define(std::string(R"JIT(
def forward(self, x, n: int):
    z = x.t()
    h = x
    for i in range(n):
)JIT") +
             (first_trip_writes_x ? "        h.add_(1.0)\n        h = h * 2.0\n"
                                  : "        h = h * 2.0\n        h.add_(1.0)\n") +
             R"JIT(
    return torch.mm(h, self.w.t()) + z.sum()
)JIT");
    auto g = inlineMethod(m, "forward");
    GraphIndex index(*g);
    MutationInfo info(g, &m);
    const auto* z = outputOf(index, c10::aten::t, 0);
    const auto* wt = outputOf(index, c10::aten::t, 1);
    EXPECT_EQ(info.hasWriters(z), first_trip_writes_x)
        << "h is x in the first trip; the add_ reaches it only before h is reassigned";
    EXPECT_FALSE(info.hasWriters(wt)) << "no write in the loop can reach the weight";
  }
}

// An index, a count or a flag points into no memory: `parts[i]` is one of the list's tensors,
// not anything at all because `i` is unknown; a new object (prim::CreateObject) is fresh.
TEST(MutationInfo, NumbersPointIntoNoMemory) {
  torch::jit::Module m("m");
  m.register_parameter("w", at::randn({4, 4}), false);
  m.define(R"JIT(
def forward(self, x, i: int):
    z = x.t()
    parts = [z, x]
    parts[i].add_(1.0)
    return torch.mm(x, self.w.t())
)JIT");
  auto g = inlineMethod(m, "forward");
  GraphIndex index(*g);
  MutationInfo info(g, &m);
  const auto* z = outputOf(index, c10::aten::t, 0);
  const auto* wt = outputOf(index, c10::aten::t, 1);
  EXPECT_TRUE(info.hasWriters(z)) << "parts[i] may be z";
  EXPECT_FALSE(info.hasWriters(wt)) << "parts[i] is never the weight";
  EXPECT_TRUE(info.memoryRoots(g->inputs()[2]).empty());
}
