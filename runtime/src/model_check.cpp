// modelTensorProblem: every tensor a loaded model holds fits what its file gave it.
#include "xalloc/runtime/model_check.h"

#include <malloc.h>

#include <set>
#include <string>
#include <vector>

#include <c10/core/CPUAllocator.h>
#include <torch/csrc/jit/api/module.h>

#include "xalloc/tensor_extent.h"

namespace xalloc::runtime {

namespace {

// What the default CPU allocator frees its blocks with.
c10::DeleterFnPtr cpuDeleter() {
  static const c10::DeleterFnPtr d = [] {
    const c10::DataPtr probe = c10::GetDefaultCPUAllocator()->allocate(64);
    return probe.get_deleter();
  }();
  return d;
}

class ExtentCheck {
public:
  void module(const torch::jit::Module& m) {
    value(m._ivalue(), "self", 0);
    for (const auto& sub : m.modules())
      for (const auto& method : sub.get_methods())
        graph(*method.graph(), method.name());
  }

private:
  void tensor(const at::Tensor& t, const std::string& where) {
    if (!problem_.empty())
      return;
    std::string problem = tensorExtentProblem(t);
    // libtorch 1.13 makes a storage of the size the pickle says around the record it read,
    // whatever the record's size: a record it read into the CPU allocator's memory is checked
    // against the block that holds it (what malloc gave for the record).
    if (problem.empty() && t.defined() && t.has_storage() && t.device().is_cpu()) {
      const c10::DataPtr& dp = t.storage().data_ptr();
      if (dp.get() && dp.get_context() == dp.get() && dp.get_deleter() == cpuDeleter()) {
        const std::size_t block = malloc_usable_size(dp.get());
        if (block < t.storage().nbytes())
          problem = "a storage of " + std::to_string(t.storage().nbytes()) +
                    " bytes read from a record of at most " + std::to_string(block);
      }
    }
    if (!problem.empty())
      problem_ = "the tensor " + where + " has " + problem +
                 ": the file says more than it holds (damaged, or not written by torch.jit.save)";
  }

  void value(const c10::IValue& v, const std::string& where, int depth) {
    if (depth > 64)
      return;
    if (v.isTensor()) {
      tensor(v.toTensor(), where);
    } else if (v.isObject()) {
      const auto obj = v.toObject();
      if (!seen_.insert(obj.get()).second)
        return;
      const auto type = obj->type();
      for (std::size_t i = 0; i < obj->slots().size(); ++i)
        value(obj->getSlot(i), where + "." + type->getAttributeName(i), depth + 1);
    } else if (v.isList()) {
      std::size_t i = 0;
      for (const auto& e : v.toListRef())
        value(e, where + "[" + std::to_string(i++) + "]", depth + 1);
    } else if (v.isTuple()) {
      std::size_t i = 0;
      for (const auto& e : v.toTupleRef().elements())
        value(e, where + "[" + std::to_string(i++) + "]", depth + 1);
    } else if (v.isGenericDict()) {
      for (const auto& e : v.toGenericDict())
        value(e.value(), where + "[...]", depth + 1);
    }
  }

  void graph(const torch::jit::Graph& g, const std::string& method) {
    std::vector<const torch::jit::Block*> blocks = {g.block()};
    while (!blocks.empty()) {
      const torch::jit::Block* b = blocks.back();
      blocks.pop_back();
      for (const torch::jit::Node* n : b->nodes()) {
        for (const torch::jit::Block* sub : n->blocks())
          blocks.push_back(sub);
        if (n->kind() == c10::prim::Constant && n->hasAttribute(c10::attr::value) &&
            n->kindOf(c10::attr::value) == torch::jit::AttributeKind::t)
          tensor(n->t(c10::attr::value), "constant " + n->output()->debugName() + " of " + method);
      }
    }
  }

  std::string problem_;
  std::set<const void*> seen_;

public:
  const std::string& problem() const { return problem_; }
};

} // namespace

std::string modelTensorProblem(const torch::jit::Module& m) {
  ExtentCheck check;
  check.module(m);
  return check.problem();
}

} // namespace xalloc::runtime
