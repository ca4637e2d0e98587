// A path in the temporary directory that no other test process uses.
#pragma once

#include <filesystem>
#include <string>

#include <unistd.h>

namespace xalloc::testing {

inline std::string tempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("xalloc_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

} // namespace xalloc::testing
