// Loading and saving TorchScript models with clear errors: every extra file is read (and so
// kept on save), the file's SHA-256 is recorded, and saving is atomic (temp file + rename).
#pragma once

#include <map>
#include <string>

#include <torch/csrc/jit/api/module.h>

namespace xalloc::tspass {

/// Extra file holding the example inputs xprof feeds a model (written by samples/*/script.py).
inline constexpr const char* kExampleInputsFile = "xalloc/example_inputs.json";
/// Extra file holding the schedule xrewrite applied to forward.
inline constexpr const char* kScheduleFile = "xalloc/schedule.json";

/// Extra file holding the schedule xrewrite applied to `method`: kScheduleFile for forward,
/// `xalloc/schedule.METHOD.json` for any other, so rewriting a second method keeps the first's.
inline std::string scheduleFileFor(const std::string& method) {
  return method == "forward" ? kScheduleFile : "xalloc/schedule." + method + ".json";
}

/// The method whose schedule the extra file `name` holds (scheduleFileFor's inverse); "" when
/// it holds none.
inline std::string methodOfScheduleFile(const std::string& name) {
  if (name == kScheduleFile)
    return "forward";
  const std::string prefix = "xalloc/schedule.", suffix = ".json";
  if (name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return "";
}

struct LoadedModel {
  torch::jit::Module module;
  std::map<std::string, std::string> extra_files;
  std::string path;
  std::string sha256;
};

/// Loads a TorchScript file on the CPU. A missing or unreadable file, a device or a folder, a
/// file that is not a TorchScript archive (a torch.save file is said to be one), a model whose
/// tensors reach past what the file holds (runtime/model_check.h), throws InputError("path",
/// reason).
LoadedModel loadModel(const std::string& path);
/// The same from the bytes of such a file (`path` names it in errors).
LoadedModel loadModelBytes(const std::string& bytes, const std::string& path);

/// Inlines `method` into the module and passes the module once through the serializer, so its
/// graph has the shape any saved copy of it will have. Loading compiles a model from its saved
/// code, and that drops code an inlined graph still carries but can never run (a call site
/// specialized with a None attribute, such as MultiheadAttention's separate-projection path),
/// which would renumber the ops after it. xprof and xrewrite both index this form, so a
/// schedule matches a rewritten model (itself a saved copy) as it matched the original.
/// Throws InputError when the model has no such method.
void canonicalize(LoadedModel& model, const std::string& method);

/// A model torch.jit.freeze made: its parameters and attributes are constants of its graphs (a
/// frozen module keeps no `training` attribute).
bool isFrozen(const torch::jit::Module& module);

/// Freezes the model as torch.jit.freeze does (numerics-changing folds included: batch norms
/// into convolutions, consecutive linears), keeping `method` when it is not forward. Returns
/// false when it was frozen already. A model in training mode is an InputError (torch.jit.freeze
/// needs eval mode).
bool freezeModel(LoadedModel& model, const std::string& method);

/// The bytes torch.jit.save writes for `module` with `extra_files` (`path` names it in errors).
std::string modelBytes(const torch::jit::Module& module,
                       const std::map<std::string, std::string>& extra_files,
                       const std::string& path);
/// Saves `module` with `extra_files` to `path` atomically.
void saveModel(const torch::jit::Module& module, const std::string& path,
               const std::map<std::string, std::string>& extra_files);

} // namespace xalloc::tspass
