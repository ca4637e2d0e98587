// loadModel / saveModel.
#include "xalloc/tspass/model_io.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/frozen_conv_folding.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/graph_iterator.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import.h>

#include "xalloc/error.h"
#include "xalloc/io.h"
#include "xalloc/op_library.h"
#include "xalloc/runtime/model_check.h"
#include "xalloc/tool.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/source_info.h"

namespace xalloc::tspass {

namespace {

// The bytes of a model in memory as libtorch's reader reads them: no copy into a stream (a
// 500 MB model copied once more cost seconds of page faults). caffe2's MemoryReadAdapter would
// do but for reads past the end, which a damaged archive asks for and this refuses.
class BytesAdapter final : public caffe2::serialize::ReadAdapterInterface {
public:
  explicit BytesAdapter(const std::string& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size())
      return 0;
    n = std::min<size_t>(n, bytes_.size() - static_cast<size_t>(pos));
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

private:
  const std::string& bytes_;
};

// What the module's tensors hold, in bytes: what a save of it will be about.
std::size_t tensorBytes(const torch::jit::Module& module) {
  std::size_t n = 0;
  for (const auto& p : module.named_attributes(/*recurse=*/true))
    if (p.value.isTensor() && p.value.toTensor().defined())
      n += p.value.toTensor().nbytes();
  return n;
}

// A module saved into memory, reserved for its tensors first. Through memory, so the archive's
// records sit under "archive/" (as a save to a stream from Python puts them), not under the
// name of a temporary file.
std::string saveToBytes(const torch::jit::Module& module,
                        const torch::jit::ExtraFilesMap& extra = {}) {
  std::string out;
  out.reserve(tensorBytes(module) + (std::size_t{1} << 20));
  torch::jit::ExportModule(
      module,
      [&out](const void* data, size_t n) -> size_t {
        out.append(static_cast<const char*>(data), n);
        return n;
      },
      extra);
  return out;
}

// A file that is not a model: a device or a folder (`xprof /dev/zero` read until memory ran
// out), a torch.save pickle; "" when it may be one.
std::string notAModel(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
    return std::string("not a regular file (") +
           (std::filesystem::is_directory(st) ? "a folder" : "a device, FIFO or socket") +
           "): a model is a file written by torch.jit.save";
  return "";
}

// A model that calls torchvision's ops (a detection model's torchvision::nms): its library
// loaded once, found where Python keeps it, and said once on stderr.
void loadTorchvisionOps(const std::string& model_path) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (c10::Dispatcher::singleton().findSchema({"torchvision::nms", ""}))
    return; // registered already: loaded with --load-library, or linked in
  const std::string lib = findTorchvisionLibrary();
  if (lib.empty())
    throw InputError(model_path,
                     "the model calls torchvision:: ops and torchvision's op library was not "
                     "found: install torchvision beside torch, set XALLOC_TORCHVISION_LIBRARY, or "
                     "pass --load-library FILE");
  loadOpLibrary(lib);
  printNote(model_path, "the model calls torchvision:: ops: loaded " + lib);
}

} // namespace

LoadedModel loadModel(const std::string& path) {
  if (const std::string why = notAModel(path); !why.empty())
    throw InputError(path, why);
  return loadModelBytes(readFile(path), path); // clear errors for missing / unreadable files
}

LoadedModel loadModelBytes(const std::string& bytes, const std::string& path) {
  LoadedModel m;
  m.path = path;
  m.sha256 = sha256Hex(bytes);
  torch::jit::ExtraFilesMap extra;
  bool callsTorchvision = false;
  const auto adapter = std::make_shared<BytesAdapter>(bytes);
  {
    if (const std::string why = runtime::modelFileProblem(adapter); !why.empty())
      throw InputError(path, why);
    caffe2::serialize::PyTorchStreamReader reader(adapter);
    for (const std::string& rec : reader.getAllRecords()) {
      const std::string prefix = "extra/";
      if (rec.compare(0, prefix.size(), prefix) == 0)
        extra[rec.substr(prefix.size())] = "";
      if (!callsTorchvision && rec.rfind("code/", 0) == 0 && rec.size() > 3 &&
          rec.compare(rec.size() - 3, 3, ".py") == 0) {
        auto [ptr, size] = reader.getRecord(rec);
        const std::string text(static_cast<const char*>(ptr.get()), size);
        callsTorchvision = text.find("ops.torchvision.") != std::string::npos;
      }
    }
  }
  if (callsTorchvision)
    loadTorchvisionOps(path);
  try {
    m.module = torch::jit::load(adapter, c10::Device(c10::kCPU), extra);
  } catch (const std::exception& e) {
    std::string why = firstLine(e.what());
    // An op from a library of custom ops (torchvision::nms): say how to load it.
    if (why.find("Unknown builtin op: ") != std::string::npos &&
        why.find("aten::") == std::string::npos) {
      if (!why.empty() && why.back() == '.')
        why.pop_back();
      why += "; load the library that defines it with --load-library FILE (torchvision's ops: "
             "its _C*.so)";
    }
    // A model rewritten for the fast form holds the runtime's classes: say where they are.
    if (why.find("__torch__.torch.classes.xalloc.") != std::string::npos ||
        why.find("xalloc::") != std::string::npos)
      why += " (the model was rewritten by xrewrite for the fast form: load "
             "libxalloc_runtime.so first, with --load-library, xalloc.load(path) in Python or "
             "xalloc::runtime::loadOps() in C++)";
    throw InputError(path, "cannot load TorchScript model: " + why);
  }
  if (const std::string problem = runtime::modelTensorProblem(m.module); !problem.empty())
    throw InputError(path, problem);
  m.extra_files.insert(extra.begin(), extra.end());
  return m;
}

void canonicalize(LoadedModel& model, const std::string& method) {
  auto m = model.module.find_method(method);
  if (!m)
    throw InputError(model.path, "the model has no method '" + method + "'");
  torch::jit::Inline(*m->graph());
  const std::shared_ptr<torch::jit::Graph> inlined = m->graph(); // alive past the reload
  try {
    const std::string bytes = saveToBytes(model.module);
    model.module = torch::jit::load(std::make_shared<BytesAdapter>(bytes), c10::Device(c10::kCPU));
  } catch (const std::exception& e) {
    throw InputError(model.path, "cannot pass the inlined model through the serializer: " +
                                     firstLine(e.what()));
  }
  // The module path of each op, which the saved code forgot (profile ops' `scope`).
  carryScopes(*inlined, *model.module.get_method(method).graph());
}

bool isFrozen(const torch::jit::Module& module) {
  return !module.hasattr("training");
}

namespace {

// BatchNorm2d checks its input's rank (aten::dim) before it normalizes. When that input is a
// convolution's output, the check is its second reader, and torch.jit.freeze then leaves the
// normalization unfolded (DenseNet's conv -> norm -> relu: 120 batch norms a call). A
// convolution's output has its input's rank, so the check reads the input instead (the same
// answer, the same error), and the folding runs again.
void foldNormsBehindRankChecks(const std::shared_ptr<torch::jit::Graph>& graph) {
  bool rewired = false;
  for (torch::jit::Node* n : allNodes(*graph)) {
    if (n->kind() != c10::aten::batch_norm)
      continue;
    torch::jit::Node* conv = n->input(0)->node();
    if (conv->kind() != c10::aten::conv1d && conv->kind() != c10::aten::conv2d &&
        conv->kind() != c10::aten::conv3d)
      continue;
    const auto uses = conv->output()->uses(); // a copy: replaceInput edits the list
    for (const auto& u : uses)
      if (u.user->kind() == c10::aten::dim) {
        u.user->replaceInput(u.offset, conv->input(0));
        rewired = true;
      }
  }
  if (rewired) {
    auto g = graph;
    torch::jit::FoldFrozenConvBatchnorm(g);
  }
}

// torch 2.x's freezing keeps a submodule whose tensors it cannot prove unwritten through the
// values the graph builds of them (nn.MultiheadAttention's fast path gathers its weights into a
// tuple for its checks): its weights stay prim::GetAttr reads, and a region over them has no
// constant weights to lay out. A tensor attribute reached from `self` through submodules and
// written by no node of the graph (alias analysis) is the constant freezing would have made.
void foldUnwrittenTensorAttributes(const torch::jit::Module& module,
                                   const std::shared_ptr<torch::jit::Graph>& graph) {
  using torch::jit::Node;
  using torch::jit::Value;
  if (graph->inputs().empty())
    return;
  std::vector<Node*> reads;
  std::shared_ptr<torch::jit::Graph> walked = graph;
  torch::jit::DepthFirstGraphNodeIterator it(walked);
  for (Node* n = it.next(); n != nullptr; n = it.next())
    if (n->kind() == c10::prim::GetAttr && n->output()->type()->kind() == c10::TypeKind::TensorType)
      reads.push_back(n);
  if (reads.empty())
    return;
  const torch::jit::AliasDb aliases(graph);
  bool folded = false;
  for (Node* n : reads) {
    // The chain of names from self: self.attn.in_proj_weight -> {attn, in_proj_weight}.
    std::vector<std::string> names;
    const Value* v = n->output();
    while (v->node()->kind() == c10::prim::GetAttr) {
      names.insert(names.begin(), v->node()->s(c10::attr::name));
      v = v->node()->input();
    }
    if (v != graph->inputs()[0] || aliases.hasWriters(n->output()))
      continue;
    torch::jit::Module owner = module;
    bool found = true;
    for (std::size_t i = 0; found && i + 1 < names.size(); ++i) {
      found = owner.hasattr(names[i]) && owner.attr(names[i]).isModule();
      if (found)
        owner = owner.attr(names[i]).toModule();
    }
    if (!found || !owner.hasattr(names.back()) || !owner.attr(names.back()).isTensor())
      continue;
    // Detached, as freezing makes its constants of parameters.
    const at::Tensor t = owner.attr(names.back()).toTensor().detach();
    torch::jit::WithInsertPoint here(graph->nodes().front());
    n->output()->replaceAllUsesWith(graph->insertConstant(t));
    folded = true;
  }
  if (folded)
    torch::jit::EliminateDeadCode(graph);
}

} // namespace

bool freezeModel(LoadedModel& model, const std::string& method) {
  if (isFrozen(model.module))
    return false;
  if (model.module.is_training())
    throw InputError(model.path, "the model is in training mode, and freezing needs eval mode "
                                 "(save it after model.eval())");
  c10::optional<std::vector<std::string>> keep;
  if (!method.empty() && method != "forward")
    keep = std::vector<std::string>{method};
  try {
    model.module = torch::jit::freeze(model.module, keep, /*optimize_numerics=*/true);
    for (const auto& m : model.module.get_methods()) {
      foldUnwrittenTensorAttributes(model.module, m.graph());
      foldNormsBehindRankChecks(m.graph());
    }
  } catch (const std::exception& e) {
    throw InputError(model.path, "cannot freeze the model: " + firstLine(e.what()));
  }
  return true;
}

std::string modelBytes(const torch::jit::Module& module,
                       const std::map<std::string, std::string>& extra_files,
                       const std::string& path) {
  torch::jit::ExtraFilesMap extra(extra_files.begin(), extra_files.end());
  try {
    return saveToBytes(module, extra);
  } catch (const std::exception& e) {
    throw InputError(path, "cannot save model: " + firstLine(e.what()));
  }
}

void saveModel(const torch::jit::Module& module, const std::string& path,
               const std::map<std::string, std::string>& extra_files) {
  writeFileAtomic(path, modelBytes(module, extra_files, path));
}

} // namespace xalloc::tspass
