// Twin regions timed once (region_twins.h).
#include "region_twins.h"

#include <sstream>
#include <unordered_map>

#include <torch/csrc/jit/ir/constants.h>

namespace xalloc::profiler::detail {

namespace {

// A tensor's shape as timing sees it: sizes, strides (none for oneDNN's opaque tensors), dtype.
void describeTensor(std::ostringstream& os, const at::Tensor& t) {
  if (!t.defined()) {
    os << "undefined";
    return;
  }
  os << t.sizes() << t.scalar_type();
  if (t.is_mkldnn())
    os << "mkldnn";
  else
    os << t.strides();
}

} // namespace

std::string regionTimingKey(const torch::jit::Graph& g, const std::vector<c10::IValue>& inputs) {
  std::ostringstream os;
  std::unordered_map<const torch::jit::Value*, std::size_t> id;
  for (const torch::jit::Value* v : g.inputs())
    id.emplace(v, id.size());
  for (const torch::jit::Node* n : g.nodes()) {
    if (!n->blocks().empty())
      return "";
    os << n->kind().toQualString() << '(';
    for (const torch::jit::Value* v : n->inputs()) {
      const auto it = id.find(v);
      os << (it == id.end() ? std::string("?") : std::to_string(it->second)) << ',';
    }
    os << ')';
    if (n->kind() == c10::prim::Constant)
      if (const auto iv = torch::jit::toIValue(n->output())) {
        if (iv->isTensor())
          describeTensor(os, iv->toTensor());
        else
          os << *iv;
      }
    for (const torch::jit::Value* v : n->outputs())
      id.emplace(v, id.size());
    os << ';';
  }
  for (const torch::jit::Value* v : g.outputs())
    os << id[v] << ',';
  for (const c10::IValue& iv : inputs) {
    os << '|';
    if (iv.isTensor())
      describeTensor(os, iv.toTensor());
    else
      os << iv.tagKind();
  }
  return os.str();
}

void takeTwinTimes(formats::Region& out, const formats::Region& twin,
                   const std::vector<bool>& ran) {
  for (std::size_t i = 0; i < out.candidates.size(); ++i) {
    formats::RegionCandidate& c = out.candidates[i];
    if (!ran[i] || i >= twin.candidates.size() || twin.candidates[i].layout != c.layout)
      continue; // its own first run failed (its note says why), or another layout
    const formats::RegionCandidate& tc = twin.candidates[i];
    if (!tc.measured) {
      c.note = tc.note;
      continue;
    }
    c.measured = true;
    c.time_ms = tc.time_ms;
    c.spread_ms = tc.spread_ms;
    c.delta_ms = tc.delta_ms;
    c.delta_spread_ms = tc.delta_spread_ms;
    c.rounds = tc.rounds;
    c.faster_rounds = tc.faster_rounds;
  }
}

} // namespace xalloc::profiler::detail
