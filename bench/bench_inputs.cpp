// benchInputs: a model's inputs for a benchmark, from a file or from the model's extra files.
#include "bench_inputs.h"

#include "xalloc/error.h"
#include "xalloc/io.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/model_io.h"

namespace xalloc::bench {

std::vector<c10::IValue> benchInputs(torch::jit::Module& module,
                                     const std::map<std::string, std::string>& extra_files,
                                     const std::string& model_path, const std::string& input_file,
                                     const std::vector<formats::InputSpec>& given) {
  std::vector<c10::IValue> inputs;
  if (!input_file.empty()) {
    // Typed as forward declares them, and checked: a value that does not fit is an input error.
    inputs = tspass::methodInputs(
        module, "forward", tspass::parseInputFile(readFile(input_file), input_file), input_file);
  } else {
    auto specs = given.empty() ? tspass::specFromExtraFiles(extra_files, model_path) : given;
    if (specs.empty())
      throw InputError(model_path, "no example inputs stored in the model (pass --input-shape, "
                                   "or --input-file)");
    inputs = tspass::methodInputs(module, "forward", tspass::makeInputs(specs, 0), model_path);
  }
  inputs.erase(inputs.begin()); // `self`
  return inputs;
}

} // namespace xalloc::bench
