// Loading and saving TorchScript models with clear errors: every extra file is read (and so
// kept on save), the file's SHA-256 is recorded, and saving is atomic (temp file + rename).
#pragma once

#include <map>
#include <string>

#include <torch/csrc/jit/api/module.h>

namespace xalloc::tspass {

/// Extra file holding the example inputs xprof feeds a model (written by samples/*/script.py).
inline constexpr const char* kExampleInputsFile = "xalloc/example_inputs.json";
/// Extra file holding the schedule xrewrite applied.
inline constexpr const char* kScheduleFile = "xalloc/schedule.json";

struct LoadedModel {
  torch::jit::Module module;
  std::map<std::string, std::string> extra_files;
  std::string path;
  std::string sha256;
};

/// Loads a TorchScript file on the CPU. A missing or unreadable file, or a file that is not a
/// TorchScript archive, throws InputError("path", reason).
LoadedModel loadModel(const std::string& path);

/// Saves `module` with `extra_files` to `path` atomically.
void saveModel(const torch::jit::Module& module, const std::string& path,
               const std::map<std::string, std::string>& extra_files);

} // namespace xalloc::tspass
