// The inputs a benchmark runs a model on: a file saved with torch.save, or the example inputs
// stored in the model. Shared by xbench-latency and xbench-peer.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/api/module.h>

#include "xalloc/formats/types.h"

namespace xalloc::bench {

/// forward's arguments (without `self`), typed as forward declares them: from `input_file` when
/// given, else from `specs` (--input-shape ...) when not empty, else from the example inputs in
/// `extra_files`; an input error when none fits.
std::vector<c10::IValue> benchInputs(torch::jit::Module& module,
                                     const std::map<std::string, std::string>& extra_files,
                                     const std::string& model_path, const std::string& input_file,
                                     const std::vector<formats::InputSpec>& specs = {});

} // namespace xalloc::bench
