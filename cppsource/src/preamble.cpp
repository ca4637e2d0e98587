// The precompiled preamble cache (preamble.h). Compiled without RTTI, like LLVM.
#include "preamble.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <unistd.h>

#include <clang/Basic/Version.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Tooling/ArgumentsAdjusters.h>
#include <clang/Tooling/CompilationDatabase.h>
#include <clang/Tooling/Tooling.h>

#include "xalloc/error.h"
#include "xalloc/io.h"

namespace xalloc::cppsource {

namespace fs = std::filesystem;
using namespace clang;

namespace {

std::string trimmed(const std::string& line) {
  const auto b = line.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return "";
  return line.substr(b, line.find_last_not_of(" \t\r\n") - b + 1);
}

// The cache folder, or empty when caching is off.
fs::path cacheDir() {
  if (const char* on = std::getenv("XALLOC_PCH"); on && *on) {
    const std::string v = on;
    if (v != "0" && v != "1")
      throw InputError("XALLOC_PCH", "'" + v + "': expected 0 (no precompiled preambles) or 1");
    if (v == "0")
      return {};
  }
  if (const char* d = std::getenv("XALLOC_PCH_DIR"); d && *d)
    return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return fs::path(x) / "xalloc" / "pch";
  if (const char* h = std::getenv("HOME"); h && *h)
    return fs::path(h) / ".cache" / "xalloc" / "pch";
  return {};
}

std::uintmax_t cacheLimitBytes() {
  std::uintmax_t mb = 1024;
  if (const char* v = std::getenv("XALLOC_PCH_CACHE_MB"); v && *v) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(v, &end, 10);
    if (*end != '\0' || errno != 0 || *v == '-' || *v == '+' || *v == ' ' || n > (1ull << 30))
      throw InputError("XALLOC_PCH_CACHE_MB",
                       "'" + std::string(v) + "': expected a whole number of MiB from 0 to 2^30");
    mb = n;
  }
  return mb << 20;
}

// The PCHs of the folder beyond its limit, the least recently used first, removed.
void trim(const fs::path& dir, std::uintmax_t limit) {
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> pchs;
  std::uintmax_t total = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".pch")
      continue;
    const auto size = e.file_size(ec);
    if (ec)
      continue;
    total += size;
    pchs.emplace_back(e.last_write_time(ec), e.path());
  }
  std::sort(pchs.begin(), pchs.end());
  for (const auto& [when, path] : pchs) {
    if (total <= limit)
      break;
    const auto size = fs::file_size(path, ec);
    forgetPch(path.string());
    total -= ec ? 0 : size;
  }
}

// Whether a flag names a relative path (-I, -isystem, -include and the like, joined or not).
bool relativePaths(const std::vector<std::string>& flags) {
  static const char* const kSeparate[] = {"-I",       "-isystem", "-iquote",     "-idirafter",
                                          "-include", "-imacros", "-isysroot",   "--sysroot",
                                          "-F",       "-iprefix", "-iwithprefix"};
  auto relative = [](const std::string& p) {
    return !p.empty() && p[0] != '/';
  };
  for (std::size_t i = 0; i < flags.size(); ++i) {
    const std::string& f = flags[i];
    for (const char* opt : kSeparate)
      if (f == opt && i + 1 < flags.size() && relative(flags[i + 1]))
        return true;
    // Joined: the path after the option's own letters (no other flag starts with these).
    for (const char* opt : {"-I", "-F", "-isystem", "-iquote", "--sysroot="})
      if (f.size() > std::strlen(opt) && f.rfind(opt, 0) == 0 &&
          relative(f.substr(std::strlen(opt))))
        return true;
  }
  return false;
}

// Writes the PCH of one header to `out` (the tool's action ignores the driver's output).
class WritePch : public GeneratePCHAction {
public:
  explicit WritePch(std::string out) : out_(std::move(out)) {}
  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance& ci, StringRef in) override {
    ci.getFrontendOpts().OutputFile = out_;
    return GeneratePCHAction::CreateASTConsumer(ci, in);
  }

private:
  std::string out_;
};

class WritePchFactory : public tooling::FrontendActionFactory {
public:
  explicit WritePchFactory(std::string out) : out_(std::move(out)) {}
  std::unique_ptr<FrontendAction> create() override { return std::make_unique<WritePch>(out_); }

private:
  std::string out_;
};

// The command's flags without the compiler, the file compiled, and its outputs.
std::vector<std::string> flagsOf(const tooling::CompileCommand& cmd) {
  std::vector<std::string> args = cmd.CommandLine;
  args = tooling::getClangStripOutputAdjuster()(args, cmd.Filename);
  args = tooling::getClangStripDependencyFileAdjuster()(args, cmd.Filename);
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path file = fs::weakly_canonical(fs::path(cmd.Directory) / cmd.Filename, ec);
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-c" || a == "-fsyntax-only")
      continue;
    if (!a.empty() && a[0] != '-' &&
        fs::weakly_canonical(fs::path(cmd.Directory) / a, ec) == file && !ec)
      continue;
    out.push_back(a);
  }
  return out;
}

} // namespace

namespace {

// The leading lines of `content` that are blank, `//` comments, `#pragma once` or
// `#include <...>`: the text up to its last such include, and the first line after them.
struct Leading {
  std::string text;
  std::string includes; // its `#include <...>` lines alone, one a line
  std::string stop;     // the line that ended them ("" at the end of the file)
};

Leading leadingIncludes(const std::string& content) {
  Leading out;
  std::size_t pos = 0, end = 0;
  while (pos < content.size()) {
    const std::size_t nl = content.find('\n', pos);
    const std::size_t next = nl == std::string::npos ? content.size() : nl + 1;
    const std::string line = trimmed(content.substr(pos, next - pos));
    if (line.rfind("#include <", 0) == 0) {
      end = next;
      out.includes += line + "\n";
    } else if (!line.empty() && line.rfind("//", 0) != 0 && line != "#pragma once") {
      out.stop = line;
      break;
    }
    pos = next;
  }
  out.text = content.substr(0, end);
  return out;
}

bool includesLibtorch(const std::string& text) {
  for (const char* lib : {"#include <torch/", "#include <ATen/", "#include <c10/"})
    if (text.find(lib) != std::string::npos)
      return true;
  return false;
}

} // namespace

std::string preambleOf(const std::string& content, const std::string& folder) {
  Leading main = leadingIncludes(content);
  std::string text = main.text;
  // The program's own header next: its leading system includes are the next thing the parse
  // reads (minigpt_cpp's main.cpp reaches <torch/torch.h> through "minigpt.h"), so they join the
  // preamble in the same order; the header itself stays out (its functions are the program's).
  const std::string quoted = "#include \"";
  if (main.stop.rfind(quoted, 0) == 0 && !folder.empty()) {
    const std::size_t close = main.stop.find('"', quoted.size());
    if (close != std::string::npos) {
      const fs::path header =
          fs::path(folder) / main.stop.substr(quoted.size(), close - quoted.size());
      std::error_code ec;
      if (fs::is_regular_file(header, ec)) {
        try {
          text += leadingIncludes(readFile(header.string())).includes;
        } catch (const std::exception&) {
          // unreadable: the parse will say so
        }
      }
    }
  }
  // Only libtorch's headers are worth it: a preamble of the standard library alone loads slower
  // than it parses (minigpt_cpp's main.cpp with only its own <chrono>...<string>: 14.8 s of CPU
  // with such a PCH, 11.6 without).
  return includesLibtorch(text) ? text : std::string();
}

std::optional<std::string> preamblePch(const std::string& content, const std::string& folder,
                                       const tooling::CompileCommand& cmd,
                                       const std::vector<std::string>& extra) {
  // The variables first: a bad value is an error on every run, not only on the one that builds.
  const fs::path dir = cacheDir();
  const std::uintmax_t limit = cacheLimitBytes();
  const std::string preamble = preambleOf(content, folder);
  if (preamble.empty() || dir.empty())
    return std::nullopt;
  std::vector<std::string> flags = flagsOf(cmd);
  flags.insert(flags.end(), extra.begin(), extra.end());
  // The folder the compile runs in: part of what the flags mean when one names a relative path
  // (`-Imock`), and only then (a temporary folder would make every run's key new).
  std::error_code ec;
  const std::string folder_run = fs::absolute(cmd.Directory, ec).lexically_normal().string();
  std::string key_text = CLANG_VERSION_STRING;
  key_text += '\0' + (relativePaths(flags) ? folder_run : std::string()) + '\0';
  for (const auto& f : flags)
    key_text += f + '\0';
  key_text += preamble;
  const std::string key = sha256Hex(key_text).substr(0, 32);
  const fs::path header = dir / (key + ".h");
  const fs::path pch = dir / (key + ".pch");
  if (fs::exists(pch, ec) && fs::exists(header, ec)) {
    fs::last_write_time(pch, fs::file_time_type::clock::now(), ec); // recently used
    return pch.string();
  }
  fs::create_directories(dir, ec);
  if (ec)
    return std::nullopt;
  // Built the second time a preamble is seen: building costs more than one parse (minigpt_cpp:
  // 17.5 s against 14.2), so a file parsed once (a one-off run) pays nothing for it.
  const fs::path seen = dir / (key + ".seen");
  if (!fs::exists(seen, ec)) {
    try {
      writeFileAtomic(seen.string(), "");
    } catch (const std::exception&) {
    }
    return std::nullopt;
  }
  // The header, once: the PCH records its size and time, so it is never written again (a link
  // of a finished temporary, which fails where another process made it first).
  const std::string tag = "." + std::to_string(::getpid()) + ".tmp";
  if (!fs::exists(header, ec)) {
    const fs::path tmp = dir / (key + ".h" + tag);
    try {
      writeFileAtomic(tmp.string(), preamble);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    (void)::link(tmp.c_str(), header.c_str());
    fs::remove(tmp, ec);
    if (!fs::exists(header, ec))
      return std::nullopt;
  }
  const fs::path tmp_pch = dir / (key + ".pch" + tag);
  std::vector<std::string> args = {"-x", "c++-header"};
  args.insert(args.end(), flags.begin(), flags.end());
  tooling::FixedCompilationDatabase db(folder_run, args);
  tooling::ClangTool tool(db, {header.string()});
  IgnoringDiagConsumer quiet;
  tool.setDiagnosticConsumer(&quiet);
  tool.setPrintErrorMessage(false);
  WritePchFactory factory(tmp_pch.string());
  if (tool.run(&factory) != 0 || !fs::exists(tmp_pch, ec)) {
    fs::remove(tmp_pch, ec);
    return std::nullopt;
  }
  fs::rename(tmp_pch, pch, ec);
  if (ec) {
    fs::remove(tmp_pch, ec);
    return std::nullopt;
  }
  trim(dir, limit);
  return fs::exists(pch, ec) ? std::optional<std::string>(pch.string()) : std::nullopt;
}

void forgetPch(const std::string& pch) {
  std::error_code ec;
  fs::remove(pch, ec);
}

} // namespace xalloc::cppsource
