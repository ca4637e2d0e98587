// The fast form's fusions by name, as fusions.def lists them: what the command lines check and
// print (xrewrite --no-fusion, --help) without the passes, so without libtorch. The passes
// themselves are fusions.h's.
#pragma once

#include <string>

namespace xalloc::tspass {

/// Whether `name` is a fusion's ("squeeze_excite").
bool isFusionName(const std::string& name);

/// The names of all fusions, comma-separated, in the order they run (for messages).
std::string fusionNames();

} // namespace xalloc::tspass
