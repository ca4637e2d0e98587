// xalloc-validate: validates documents (a file may hold a stream of them, JSON Lines) against
// formats/schema/ with valijson. Exit 0 when all are valid; else each error on stderr, exit 1.
// The command-line tests validate every document the tools write with it.
//   xalloc-validate [--schemas DIR] FILE...
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "schema_check.h"
#include "xalloc/error.h"
#include "xalloc/formats/documents.h"

int main(int argc, char** argv) {
  std::string dir = XALLOC_SCHEMA_DIR;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--schemas" && i + 1 < argc)
      dir = argv[++i];
    else
      files.push_back(a);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: xalloc-validate [--schemas DIR] FILE...\n");
    return 2;
  }
  try {
    const xalloc::testing::SchemaSet schemas(dir);
    int bad = 0;
    for (const auto& f : files) {
      const auto set = xalloc::formats::DocumentSet::read(f);
      for (std::size_t i = 0; i < set.documents().size(); ++i)
        for (const auto& e : schemas.errors(set.documents()[i])) {
          std::fprintf(stderr, "%s: document %zu: %s\n", f.c_str(), i + 1, e.c_str());
          bad = 1;
        }
    }
    return bad;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xalloc-validate: error: %s\n", e.what());
    return 2;
  }
}
