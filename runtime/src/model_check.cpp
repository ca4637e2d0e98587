// modelTensorProblem: every tensor a loaded model holds fits what its file gave it.
#include "xalloc/runtime/model_check.h"

#include <set>
#include <string>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/version.h>

#include "xalloc/error.h"
#include "xalloc/tensor_extent.h"

namespace xalloc::runtime {

namespace {

class ExtentCheck {
public:
  void module(const torch::jit::Module& m) {
    value(m._ivalue(), "self", 0);
    // Modules of one type share their methods' graphs: each graph is read once.
    std::set<const torch::jit::Graph*> graphs;
    for (const auto& sub : m.modules())
      for (const auto& method : sub.get_methods())
        if (graphs.insert(method.graph().get()).second)
          graph(*method.graph(), method.name());
  }

private:
  void tensor(const at::Tensor& t, const std::string& where) {
    if (!problem_.empty())
      return;
    const std::string problem = tensorExtentProblem(t);
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

namespace {
constexpr const char* kScriptIt =
    "script it first: torch.jit.save(torch.jit.script(model.eval()), PATH), or "
    "torch.jit.trace(model, example_inputs)";
} // namespace

namespace {
// The digits right after `prefix` in `text`, or "".
std::string numberAfter(const std::string& text, const std::string& prefix) {
  const std::size_t at = text.find(prefix);
  if (at == std::string::npos)
    return "";
  std::size_t end = at + prefix.size();
  while (end < text.size() && text[end] >= '0' && text[end] <= '9')
    ++end;
  return text.substr(at + prefix.size(), end - at - prefix.size());
}
} // namespace

std::string modelFileProblem(const std::shared_ptr<caffe2::serialize::ReadAdapterInterface>& in) {
  unsigned char head[2] = {0, 0};
  const bool pickle =
      in->size() >= 2 && in->read(0, head, 2, "header") == 2 && head[0] == 0x80 && head[1] <= 5;
  try {
    caffe2::serialize::PyTorchStreamReader reader(in);
    bool code = false, data = false;
    for (const std::string& rec : reader.getAllRecords()) {
      code = code || rec.rfind("code/", 0) == 0;
      data = data || rec == "data.pkl";
    }
    if (data && !code)
      return std::string("a torch.save file (a pickled module or state dict), not TorchScript: ") +
             kScriptIt;
    return "";
  } catch (const std::exception& e) {
    // An archive of a newer file format than this libtorch reads (PyTorchStreamReader's check
    // of its `version` record): which versions, in one line, not "not a TorchScript model".
    const std::string what = e.what();
    const std::string version = numberAfter(what, "file with version ");
    const std::string most = numberAfter(what, "maximum supported version for reading is ");
    if (!version.empty() && !most.empty())
      return "written by a newer PyTorch than this one (torch " TORCH_VERSION
             "): its file format version is " +
             version + ", and this torch reads up to version " + most +
             "; load it with the torch that saved it, or save it again with this one";
    // torch.save's legacy format is a pickle (protocol 2: 0x80 0x02) with no zip around it.
    if (pickle)
      return std::string("a pickle (torch.save's legacy format), not TorchScript: ") + kScriptIt;
    return "not a TorchScript model (a zip archive written by torch.jit.save; truncated or "
           "another kind of file?): " +
           firstLine(e.what());
  }
}

} // namespace xalloc::runtime
