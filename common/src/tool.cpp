// Shared behaviour of the x-allocator command-line tools: diagnostics, exit codes, CLI11 parsing.
#include "xalloc/tool.h"

#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <unistd.h>

#include "xalloc/error.h"
#include "xalloc/io.h"
#include "xalloc/version.h"

namespace xalloc {

namespace {
void printDiagnostic(const std::string& where, const char* level, const std::string& message) {
  std::cerr << escapeControls(where.empty() ? std::string() : where + ": ") << level << ": "
            << escapeControls(message) << "\n";
}
} // namespace

std::string escapeControls(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    // C0 controls, DEL, and the C1 controls (U+0080..U+009F: 0xC2 0x80..0x9F in UTF-8), which
    // terminals act on (ESC sequences, CSI).
    const bool c1 = c == 0xC2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if (c < 0x20 || c == 0x7F || c1) {
      const unsigned v = c1 ? static_cast<unsigned char>(text[++i]) : c;
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", v);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void printError(const std::string& where, const std::string& message) {
  printDiagnostic(where, "error", message);
}
void printWarning(const std::string& where, const std::string& message) {
  printDiagnostic(where, "warning", message);
}
void printNote(const std::string& where, const std::string& message) {
  printDiagnostic(where, "note", message);
}

int runGuarded(const std::string& tool, const std::function<int()>& body) {
  removeTempFilesOnSignals(); // a tool killed mid-write leaves no temp file behind
  try {
    return body();
  } catch (const InputError& e) {
    printError(e.where().empty() ? tool : e.where(), e.message());
  } catch (const FormatError& e) {
    const InputError located = inputErrorAt(e, tool);
    printError(located.where(), located.message());
  } catch (const std::exception& e) {
    printError(tool, "internal error: " + firstLine(e.what()));
  }
  return kExitError;
}

std::optional<int> parseCommandLine(CLI::App& app, int argc, char** argv) {
  app.set_version_flag("--version", std::string(app.get_name()) + " (x-allocator) " + kVersion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, as every other diagnostic.
    std::cerr << app.get_name() << ": error: " << e.what() << " (see --help)\n";
    return kExitError;
  }
  return std::nullopt;
}

void addModelInputFlags(CLI::App& app, const ModelInputFlags& f) {
  app.add_option("--input-shape", f.shapes,
                 "shape of an input, e.g. 1x3x224x224 (repeat per input; default: the model's "
                 "xalloc/example_inputs.json)");
  app.add_option("--input-dtype", f.dtypes,
                 "dtype of an input (float32, int64, ...; by position, the last one repeats)");
  app.add_option("--input-range", f.ranges,
                 "LOW:HIGH for an input (integers: uniform in [LOW, HIGH); by position, the last "
                 "one repeats)");
  app.add_option("--input-file", f.file,
                 "inputs saved with torch.save (a tensor, or a tuple or list of tensors, ints, "
                 "floats, bools) instead of made ones");
  app.add_option("--load-library", f.op_libraries,
                 "a library of custom ops the model calls (torchvision's _C*.so, your own "
                 "TORCH_LIBRARY ops), loaded before the model; repeatable");
}

bool inputIsStdin(const std::string& tool, const std::string& input, const char* what) {
  if (!input.empty() && input != "-")
    return false;
  if (input.empty() && ::isatty(STDIN_FILENO))
    throw InputError(tool, std::string("no input: give ") + what +
                               " as a file, or '-' to read documents from stdin");
  return true;
}

} // namespace xalloc
