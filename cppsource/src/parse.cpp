// The Clang driver of the C++ path: compile commands, one parse per file, Clang's diagnostics
// as one line. Compiled without RTTI, like LLVM.
#include "xalloc/cppsource/ast.h"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <memory>
#include <unistd.h>

#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Tooling/ArgumentsAdjusters.h>
#include <clang/Tooling/CompilationDatabase.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/raw_ostream.h>

#include "xalloc/error.h"
#include "xalloc/io.h"

#include "preamble.h"

namespace xalloc::cppsource {

namespace {

using OnAst = std::function<void(ASTContext&)>;

class Consumer : public ASTConsumer {
public:
  Consumer(const OnAst& f, std::string& error, CompilerInstance& ci)
      : f_(f), error_(error), ci_(ci) {}
  void HandleTranslationUnit(ASTContext& ctx) override {
    if (ci_.getDiagnostics().hasErrorOccurred()) {
      error_ = "Clang could not parse it";
      return;
    }
    const SourceManager& sm = ctx.getSourceManager();
    if (sm.getFileEntryForID(sm.getMainFileID()))
      f_(ctx);
  }

private:
  const OnAst& f_;
  std::string& error_;
  CompilerInstance& ci_;
};

class Action : public ASTFrontendAction {
public:
  Action(const OnAst& f, std::string& error) : f_(f), error_(error) {}
  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance& ci, StringRef) override {
    return std::make_unique<Consumer>(f_, error_, ci);
  }

private:
  const OnAst& f_;
  std::string& error_;
};

class Factory : public tooling::FrontendActionFactory {
public:
  Factory(const OnAst& f, std::string& error) : f_(f), error_(error) {}
  std::unique_ptr<FrontendAction> create() override { return std::make_unique<Action>(f_, error_); }

private:
  const OnAst& f_;
  std::string& error_;
};

} // namespace

std::unique_ptr<tooling::CompilationDatabase>
compilationDatabase(const std::string& build_dir, const std::vector<std::string>& fixed_args) {
  if (!fixed_args.empty() || build_dir.empty()) {
    std::vector<std::string> args = fixed_args;
    return std::make_unique<tooling::FixedCompilationDatabase>(".", args);
  }
  std::string err;
  auto db = tooling::CompilationDatabase::loadFromDirectory(build_dir, err);
  if (!db)
    throw InputError(build_dir, "no compilation database: " + firstLine(err));
  return db;
}

void parseFile(const tooling::CompilationDatabase& db, const std::string& f,
               const OnParsed& on_parsed) {
  const std::string path = canonical(f);
  const std::string content =
      readFile(f); // a clear error, in the name the user gave, for a missing file
  std::string error;
  const std::string given = std::filesystem::absolute(f).lexically_normal().string();
  const OnAst with_name = [&](ASTContext& ctx) {
    on_parsed(ctx, given);
  };
  // Compile commands written for GCC may carry warning flags Clang does not know, and -Werror
  // would make them fatal: warnings are not ours to judge here, only the parse.
  const std::vector<std::string> lenient = {"-Wno-unknown-warning-option", "-Wno-error"};
  std::string diagnostics;
  // One parse, with the preamble's PCH loaded when there is one.
  auto attempt = [&](const std::optional<std::string>& pch) {
    error.clear();
    diagnostics.clear();
    Factory factory(with_name, error);
    tooling::ClangTool tool(db, {path});
    tool.appendArgumentsAdjuster(
        tooling::getInsertArgumentAdjuster(lenient, tooling::ArgumentInsertPosition::END));
    if (pch)
      tool.appendArgumentsAdjuster(tooling::getInsertArgumentAdjuster(
          {"-include-pch", *pch}, tooling::ArgumentInsertPosition::BEGIN));
    llvm::raw_string_ostream diag_stream(diagnostics);
    // The printer holds the options by reference count.
    TextDiagnosticPrinter printer(diag_stream, new DiagnosticOptions());
    tool.setDiagnosticConsumer(&printer);
    tool.setPrintErrorMessage(false);
    // Clang also writes "N errors generated." to stderr itself; keep stderr to our one line.
    std::fflush(stderr);
    const int saved = ::dup(2);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0)
      ::dup2(null, 2);
    const int rc = tool.run(&factory);
    std::fflush(stderr);
    if (saved >= 0) {
      ::dup2(saved, 2);
      ::close(saved);
    }
    if (null >= 0)
      ::close(null);
    diag_stream.flush();
    return rc == 0 && error.empty();
  };
  std::optional<std::string> pch;
  if (const auto commands = db.getCompileCommands(path); !commands.empty())
    pch = preamblePch(content, std::filesystem::path(path).parent_path().string(), commands.front(),
                      lenient);
  if (pch && !attempt(pch)) {
    // The parse without it decides. A header changed since the PCH was built, or a PCH that
    // does not fit, is dropped (Clang names it): the next parse builds it again.
    if (diagnostics.find("precompiled") != std::string::npos ||
        diagnostics.find("PCH") != std::string::npos ||
        diagnostics.find("AST file") != std::string::npos)
      forgetPch(*pch);
    pch.reset();
  }
  if (!pch && !attempt(std::nullopt)) {
    std::string first = diagnostics.substr(0, diagnostics.find('\n'));
    throw InputError(f, "cannot parse: " + (first.empty() ? error : first));
  }
}

} // namespace xalloc::cppsource
