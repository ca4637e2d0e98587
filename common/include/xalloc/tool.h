// What every command-line tool shares: compiler-style diagnostics, turning errors into exit
// codes, and CLI11 parsing with --version. (How a tool writes its document: formats/documents.h.)
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace xalloc {

/// `text` with control characters written as \xHH (C0, DEL and C1): what a diagnostic shows of
/// text from a file someone else wrote (a model's input names, its warnings, its attributes).
std::string escapeControls(const std::string& text);

/// "where: error: message" on stderr (where may be empty: "error: message"), control characters
/// escaped.
void printError(const std::string& where, const std::string& message);
void printWarning(const std::string& where, const std::string& message);
void printNote(const std::string& where, const std::string& message);

/// Runs a tool body: InputError prints "where: error: …" and gives 2; any other exception prints
/// "tool: error: internal error: …" and gives 2. Otherwise returns the body's exit code.
int runGuarded(const std::string& tool, const std::function<int()>& body);

/// Adds --version to `app` and parses argv. Returns nullopt to go on, or the exit code to return
/// now: 0 after --help/--version, 2 after a usage error (CLI11's message is printed).
std::optional<int> parseCommandLine(CLI::App& app, int argc, char** argv);

/// Where the flags that say how to run a model go (xprof, xrewrite, the benchmarks).
struct ModelInputFlags {
  std::vector<std::string>& shapes; // --input-shape "4x64", one per input
  std::vector<std::string>& dtypes; // --input-dtype, matched by position; the last one repeats
  std::vector<std::string>& ranges; // --input-range "LOW:HIGH", likewise
  std::string& file;                // --input-file: inputs saved with torch.save
  std::vector<std::string>& op_libraries; // --load-library, loaded before the model
};
/// Adds those flags to `app`, with one help text for every tool.
void addModelInputFlags(CLI::App& app, const ModelInputFlags& f);

/// True when the input should be read from stdin: "" or "-". When it is "" and stdin is a
/// terminal, throws InputError: the user forgot the input.
bool inputIsStdin(const std::string& tool, const std::string& input, const char* what);

} // namespace xalloc
