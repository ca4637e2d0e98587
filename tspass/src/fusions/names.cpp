// The fusions' names (fusion_names.h), read from fusions.def. No libtorch.
#include "xalloc/tspass/fusion_names.h"

#include <array>
#include <string_view>

namespace xalloc::tspass {

namespace {
constexpr std::array kNames = {
#define FUSION(name, function, what) std::string_view(#name),
#include "fusions.def"
#undef FUSION
};
} // namespace

bool isFusionName(const std::string& name) {
  for (std::string_view n : kNames)
    if (n == name)
      return true;
  return false;
}

std::string fusionNames() {
  std::string out;
  for (std::string_view n : kNames)
    out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

} // namespace xalloc::tspass
