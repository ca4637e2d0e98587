// A sample model of the build frozen as xrewrite --freeze and xprof's regions freeze it, with
// its graph and its stored example inputs, and what the region tests do with it: run a graph,
// count its ops, decide a region into a layout, pack its convolution regions as the fast form
// does.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/irparser.h>

#include "xalloc/formats/layout_traits.h"
#include "xalloc/formats/schedule.h"
#include "xalloc/tspass/graph_index.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/model_io.h"
#include "xalloc/tspass/region_layouts.h"
#include "xalloc/tspass/regions.h"

namespace xalloc::testing {

struct Frozen {
  tspass::LoadedModel model;
  std::shared_ptr<torch::jit::Graph> graph;
  std::vector<c10::IValue> inputs; // self first
};

/// samples/<name>.pt frozen. `inlined`: its forward graph inlined with the original source
/// ranges (as xprof's regions see it); else the method's graph itself (edits to it are what the
/// module runs, before its first call).
inline Frozen frozenSample(const std::string& name, bool inlined = true) {
  const std::string path = std::string(XALLOC_SAMPLES_DIR) + "/" + name + ".pt";
  Frozen f{tspass::loadModel(path), nullptr, {}};
  tspass::freezeModel(f.model, "forward");
  tspass::canonicalize(f.model, "forward");
  if (inlined) {
    f.graph = tspass::inlineMethod(f.model.module, "forward");
    tspass::useOriginalSourceRanges(*f.graph);
  } else {
    f.graph = f.model.module.get_method("forward").graph();
  }
  auto x = tspass::makeInputs(tspass::specFromExtraFiles(f.model.extra_files, path), 7);
  f.inputs = tspass::methodInputs(f.model.module, "forward", x, path);
  return f;
}

inline std::vector<std::optional<int>> ranksOf(const Frozen& f) {
  return tspass::inputRanks(std::vector<c10::IValue>(f.inputs.begin() + 1, f.inputs.end()));
}

/// `ir` (parsed, or a graph), each graph input named %w* replaced by a constant tensor from
/// `weights` (in order), as freezing leaves a model's weights: its inputs are then the rest.
inline std::shared_ptr<torch::jit::Graph> frozenGraph(std::shared_ptr<torch::jit::Graph> g,
                                                      std::vector<at::Tensor> weights) {
  std::size_t next = 0;
  for (std::size_t i = 0; i < g->inputs().size();) {
    torch::jit::Value* in = g->inputs()[i];
    if (in->debugName().rfind("w", 0) != 0) {
      ++i;
      continue;
    }
    torch::jit::WithInsertPoint at(g->block()->nodes().front());
    in->replaceAllUsesWith(g->insertConstant(weights.at(next++)));
    g->eraseInput(i);
  }
  return g;
}
inline std::shared_ptr<torch::jit::Graph> frozenGraph(const char* ir,
                                                      std::vector<at::Tensor> weights) {
  auto g = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(ir, g.get());
  return frozenGraph(g, std::move(weights));
}

/// The graph run on `in` (a copy: the graph itself is never run, so it can still be edited).
inline c10::IValue runGraph(const std::shared_ptr<torch::jit::Graph>& g,
                            const std::vector<c10::IValue>& in) {
  torch::jit::GraphFunction fn("forward", g->copy(), nullptr);
  torch::jit::Stack s(in.begin(), in.end());
  fn.run(s);
  return s.back();
}

/// samples/<name>.pt frozen with each 4-D (convolution) region packed channels-last, as the fast
/// form writes it; a region the layout does not apply to fails the calling test.
inline Frozen packedSample(const std::string& name) {
  Frozen f = frozenSample(name);
  formats::RegionCandidate packed;
  packed.layout = formats::layoutTraits(formats::LayoutTarget::ChannelsLast, true);
  for (tspass::LayoutRegion& r : tspass::findLayoutRegions(*f.graph, ranksOf(f)))
    if (r.rank == 4) {
      EXPECT_TRUE(tspass::applyRegionLayout(*f.graph, r, packed).applied);
    }
  return f;
}

/// How many of the graph's top-level ops are `kind`.
inline std::size_t countNodes(const torch::jit::Graph& g, const char* kind) {
  std::size_t n = 0;
  for (const torch::jit::Node* node : g.nodes())
    n += tspass::hasKind(node, kind);
  return n;
}

/// A sync decision that runs region `r` of the indexed graph in `layout`.
inline formats::Decision regionDecision(const tspass::LayoutRegion& r,
                                        const tspass::GraphIndex& index, const char* layout) {
  formats::Decision d;
  d.action = formats::Action::Sync;
  d.setRegion(tspass::regionRef(r, index, 0), *formats::layoutTraits(layout));
  d.anchor = d.region->nodes.front();
  return d;
}

} // namespace xalloc::testing
