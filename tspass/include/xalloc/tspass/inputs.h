// Example inputs for a model: from its `xalloc/example_inputs.json` extra file or from flags, and
// the seeded random tensors made from them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>

#include "xalloc/formats/profile.h"

namespace torch::jit {
struct Module;
}

namespace xalloc::tspass {

/// Parses "4x64" (or "4,64"; "" is a scalar tensor). Throws InputError naming `flag`.
std::vector<std::int64_t> parseShape(const std::string& text, const std::string& flag);

/// Parses "LOW:HIGH". Throws InputError naming `flag`.
std::pair<double, double> parseRange(const std::string& text, const std::string& flag);

/// Input specs from --input-shape / --input-dtype / --input-range flags: one shape per input;
/// dtypes and ranges are matched by position and the last one given repeats. `tool` names the
/// program in errors.
std::vector<formats::InputSpec> specsFromFlags(const std::vector<std::string>& shapes,
                                               const std::vector<std::string>& dtypes,
                                               const std::vector<std::string>& ranges,
                                               const std::string& tool);

/// Reads the spec stored in a model's extra files; empty when there is none.
std::vector<formats::InputSpec> specFromExtraFiles(const std::map<std::string, std::string>& extra,
                                                   const std::string& model_path);

/// Makes one tensor per spec with a generator seeded by `seed`: integers uniform in [low, high),
/// floats standard normal (or uniform in [low, high) when a range is given).
std::vector<c10::IValue> makeInputs(const std::vector<formats::InputSpec>& specs,
                                    std::uint64_t seed);

/// The full argument list of `method` (the module object first): `tensors`, then the schema's
/// defaults for the remaining arguments. When the first argument is a list that the first value
/// does not fit and all of `tensors` together do, they are that list (two --input-shape images
/// for a detection model's `List[Tensor]`). Throws InputError when an argument has no value.
std::vector<c10::IValue> methodInputs(torch::jit::Module& module, const std::string& method,
                                      std::vector<c10::IValue> tensors, const std::string& path);

/// Tensors saved with torch.save (the bytes of `path`): one tensor, or a tuple or list of
/// inputs (a list or dict of one element too). A file that is not one is an InputError naming
/// `path`.
std::vector<c10::IValue> parseInputFile(const std::string& bytes, const std::string& path);

/// `inputs` with each float tensor's elements (in lists and tuples too) moved one unit in the
/// last place, up or down at random (seeded by `draw`), each in its own layout; the rest as they
/// are. Run on them, a model or region shows what float32 rounding alone does to its outputs.
std::vector<c10::IValue> oneUlpAway(const std::vector<c10::IValue>& inputs, std::uint64_t draw);

/// What torch.save wrote (its zip format), read with libtorch's unpickler; a list or dict of one
/// element, which Python pickles with opcodes libtorch 1.13 does not read (APPEND, SETITEM),
/// rewritten first into those it does. Throws what the unpickler throws.
c10::IValue unpickleTorchSave(const std::string& bytes);

} // namespace xalloc::tspass
