// loadModel / saveModel.
#include "xalloc/tspass/model_io.h"

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/serialization/import.h>

#include "xalloc/error.h"
#include "xalloc/io.h"
#include "xalloc/tspass/source_info.h"

namespace xalloc::tspass {

LoadedModel loadModel(const std::string& path) {
  LoadedModel m;
  m.path = path;
  std::string bytes = readFile(path); // clear errors for missing / unreadable files
  m.sha256 = sha256Hex(bytes);
  torch::jit::ExtraFilesMap extra;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const std::string& rec : reader.getAllRecords()) {
      const std::string prefix = "extra/";
      if (rec.compare(0, prefix.size(), prefix) == 0)
        extra[rec.substr(prefix.size())] = "";
    }
  } catch (const std::exception& e) {
    throw InputError(path, "not a TorchScript model (expected a zip archive written by "
                           "torch.jit.save): " +
                               firstLine(e.what()));
  }
  try {
    m.module = torch::jit::load(path, c10::Device(c10::kCPU), extra);
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
    throw InputError(path, "cannot load TorchScript model: " + why);
  }
  m.extra_files.insert(extra.begin(), extra.end());
  return m;
}

void canonicalize(LoadedModel& model, const std::string& method) {
  auto m = model.module.find_method(method);
  if (!m)
    throw InputError(model.path, "the model has no method '" + method + "'");
  torch::jit::Inline(*m->graph());
  const std::shared_ptr<torch::jit::Graph> inlined = m->graph(); // alive past the reload
  std::stringstream buffer;
  try {
    model.module.save(buffer);
    model.module = torch::jit::load(buffer, c10::Device(c10::kCPU));
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
  } catch (const std::exception& e) {
    throw InputError(model.path, "cannot freeze the model: " + firstLine(e.what()));
  }
  return true;
}

void saveModel(const torch::jit::Module& module, const std::string& path,
               const std::map<std::string, std::string>& extra_files) {
  torch::jit::ExtraFilesMap extra(extra_files.begin(), extra_files.end());
  // Through memory, so the archive's records sit under "archive/" (as a save to a stream from
  // Python puts them), not under the name of a temporary file.
  std::ostringstream bytes;
  try {
    module.save(bytes, extra);
  } catch (const std::exception& e) {
    throw InputError(path, "cannot save model: " + firstLine(e.what()));
  }
  writeFileAtomic(path, bytes.str());
}

} // namespace xalloc::tspass
