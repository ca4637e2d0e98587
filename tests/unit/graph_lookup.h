// Finding ops and their outputs in a GraphIndex, for tests on small graphs; a module from source,
// a schedule numbering a graph's ops as xprof would, and its sync and remove decisions.
#pragma once

#include <cstdint>

#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <vector>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include "xalloc/formats/schedule.h"
#include "xalloc/tspass/graph_index.h"

namespace xalloc::tspass::testing {

/// The position of the nth op of this kind, -1 when there is none.
inline std::int64_t opOf(const GraphIndex& index, c10::Symbol kind, int nth = 0) {
  for (std::size_t i = 0; i < index.ops().size(); ++i)
    if (index.ops()[i]->kind() == kind && nth-- == 0)
      return static_cast<std::int64_t>(i);
  return -1;
}

/// The output of the nth op of this kind.
inline const torch::jit::Value* outputOf(const GraphIndex& index, c10::Symbol kind, int nth = 0) {
  return index.ops()[static_cast<std::size_t>(opOf(index, kind, nth))]->output();
}

inline torch::jit::Module makeModule(const std::string& src) {
  torch::jit::Module m("m");
  m.define(src);
  return m;
}

inline std::vector<torch::jit::Node*> nodesOf(torch::jit::Graph& g, c10::Symbol kind) {
  std::vector<torch::jit::Node*> out;
  for (auto* n : g.nodes())
    if (n->kind() == kind)
      out.push_back(n);
  return out;
}

// A schedule whose ops are the graph's ops, as xprof would have numbered them.
inline formats::Schedule scheduleFor(const GraphIndex& index) {
  formats::Schedule s;
  for (std::size_t i = 0; i < index.ops().size(); ++i) {
    formats::Op op;
    op.id = static_cast<std::int64_t>(i);
    op.kind = index.ops()[i]->kind().toQualString();
    op.anchor = index.anchor(op.id);
    s.ops.push_back(op);
  }
  return s;
}

inline formats::Decision syncOf(const GraphIndex& index, std::int64_t producer,
                                std::vector<std::int64_t> consumers) {
  formats::Decision d;
  d.action = formats::Action::Sync;
  d.producer = producer;
  d.anchor = index.anchor(producer);
  d.consumers = std::move(consumers);
  return d;
}

// Removes the first aten::contiguous of the graph.
inline formats::Decision removeFirstConversion(const GraphIndex& index) {
  formats::Decision d;
  d.action = formats::Action::Remove;
  d.producer = opOf(index, c10::aten::contiguous);
  d.anchor = index.anchor(d.producer);
  return d;
}

} // namespace xalloc::tspass::testing
