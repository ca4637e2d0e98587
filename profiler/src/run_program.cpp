// profileProgram: run a libtorch program under libxprof_hook.so, symbolize the stacks the hook
// recorded, and assemble the profile (call sites, anchors, device, idle windows).
#include "xalloc/profiler/run_program.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "xalloc/error.h"
#include "xalloc/formats/json_reader.h"
#include "xalloc/io.h"
#include "xalloc/profiler/device_info.h"
#include "xalloc/profiler/hook_record.h"
#include "xalloc/profiler/idle_windows.h"
#include "xalloc/profiler/trace.h"

namespace xalloc::profiler {

namespace fs = std::filesystem;

namespace {

const char* kTool = "xprof";

// An executable named like a shell would find it: a path, or a name on $PATH.
std::string findExecutable(const std::string& name) {
  if (name.find('/') != std::string::npos)
    return ::access(name.c_str(), X_OK) == 0 ? name : std::string();
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0 && isRegularFile(candidate))
      return candidate;
  }
  return {};
}

std::string findHook(const RunOptions& o) {
  std::vector<std::string> candidates;
  if (!o.hook.empty())
    candidates.push_back(o.hook);
  else if (const char* env = std::getenv("XPROF_HOOK"))
    candidates.push_back(env);
  else
    candidates = {selfDir() + "/../lib/libxprof_hook.so", selfDir() + "/libxprof_hook.so",
                  selfDir() + "/../lib/xalloc/libxprof_hook.so"};
  for (const auto& c : candidates)
    if (isRegularFile(c))
      return fs::absolute(c).lexically_normal().string();
  throw InputError(kTool, "cannot find the hook library libxprof_hook.so (looked for " +
                              candidates.front() + "; set XPROF_HOOK)");
}

std::string findSymbolizer(const RunOptions& o) {
  std::string s = o.symbolizer;
  if (s.empty())
    if (const char* env = std::getenv("XPROF_SYMBOLIZER"))
      s = env;
  for (const std::string& name :
       s.empty() ? std::vector<std::string>{"llvm-symbolizer-14", "llvm-symbolizer"}
                 : std::vector<std::string>{s}) {
    std::string found = findExecutable(name);
    if (!found.empty())
      return found;
  }
  throw InputError(kTool, "cannot find llvm-symbolizer to read the program's debug info "
                          "(apt-get install llvm-14, or set XPROF_SYMBOLIZER)");
}

// Runs `argv` with `env` added, stdin/stdout/stderr redirected where given (-1: inherited).
// Returns the wait status.
int spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int in_fd,
          int out_fd, bool stdout_to_stderr) {
  const pid_t pid = ::fork();
  if (pid < 0)
    throw InputError(kTool, std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    for (const auto& kv : env)
      ::putenv(const_cast<char*>(kv.c_str()));
    if (in_fd >= 0)
      ::dup2(in_fd, 0);
    if (out_fd >= 0)
      ::dup2(out_fd, 1);
    else if (stdout_to_stderr)
      ::dup2(2, 1);
    std::vector<char*> args;
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "xprof: error: cannot run '%s': %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "xprof-run.XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      throw InputError(kTool,
                       std::string("cannot create a temporary folder: ") + std::strerror(errno));
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

struct Symbol {
  std::string file, function;
  std::int64_t line = 0, col = 0;
};

// Every inlined frame at each offset of one object, innermost first.
std::map<std::uint64_t, std::vector<Symbol>> symbolize(const std::string& symbolizer,
                                                       const std::string& object,
                                                       const std::vector<std::uint64_t>& offsets,
                                                       const std::string& dir) {
  const std::string in = dir + "/addresses.txt", out = dir + "/symbols.jsonl";
  {
    std::ofstream f(in);
    for (auto o : offsets)
      f << "0x" << std::hex << o << "\n";
  }
  const int in_fd = ::open(in.c_str(), O_RDONLY);
  const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int status =
      spawn({symbolizer, "--obj=" + object, "--inlining", "--demangle", "--output-style=JSON"}, {},
            in_fd, out_fd, false);
  ::close(in_fd);
  ::close(out_fd);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw InputError(kTool, symbolizer + " failed on " + object);
  std::map<std::uint64_t, std::vector<Symbol>> result;
  std::ifstream f(out);
  std::string line;
  std::size_t k = 0;
  while (std::getline(f, line) && k < offsets.size()) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    auto& frames = result[offsets[k++]];
    if (j.is_discarded() || !j.contains("Symbol"))
      continue;
    for (const auto& s : j["Symbol"])
      frames.push_back({s.value("FileName", ""), s.value("FunctionName", ""),
                        s.value("Line", std::int64_t{0}), s.value("Column", std::int64_t{0})});
  }
  return result;
}

// The text of source lines (trimmed), each file read once.
class SourceLines {
public:
  std::string at(const std::string& file, std::int64_t line) {
    auto [it, fresh] = files_.try_emplace(file);
    if (fresh) {
      std::ifstream f(file);
      for (std::string text; std::getline(f, text);)
        it->second.push_back(std::move(text));
    }
    if (line < 1 || static_cast<std::size_t>(line) > it->second.size())
      return {};
    const std::string& text = it->second[static_cast<std::size_t>(line - 1)];
    const auto b = text.find_first_not_of(" \t");
    return b == std::string::npos ? std::string() : text.substr(b);
  }

private:
  std::map<std::string, std::vector<std::string>> files_;
};

std::string relativeTo(const std::string& file, const std::string& base) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(file, ec);
  const fs::path b = fs::weakly_canonical(base, ec);
  const fs::path rel = p.lexically_relative(b);
  if (rel.empty() || *rel.begin() == "..")
    return file;
  return rel.string();
}

} // namespace

bool isUserSource(const std::string& file) {
  if (file.empty() || file == "??")
    return false;
  for (const char* p : {"/usr/include/", "/usr/lib/", "/usr/local/include/", "/usr/src/"})
    if (file.rfind(p, 0) == 0)
      return false;
  for (const char* p : {"/torch/csrc/", "/torch/include/", "/include/ATen/", "/include/c10/",
                        "/include/c++/", "/site-packages/", "/dist-packages/"})
    if (file.find(p) != std::string::npos)
      return false;
  return true;
}

std::string functionWithoutParameters(const std::string& d) {
  int nest = 0; // inside <...> or a GCC lambda's {lambda(...)#1}
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i] == '<' || d[i] == '{')
      ++nest;
    else if ((d[i] == '>' || d[i] == '}') && nest > 0)
      --nest;
    else if (d[i] == '(' && nest == 0) {
      if (d.compare(i, 21, "(anonymous namespace)") == 0) {
        i += 20;
        continue;
      }
      if (i >= 8 && d.compare(i - 8, 8, "operator") == 0 && i + 1 < d.size() && d[i + 1] == ')') {
        ++i; // operator()
        continue;
      }
      return d.substr(0, i);
    }
  }
  return d;
}

formats::Profile profileProgram(const RunOptions& o) {
  if (o.command.empty())
    throw InputError(kTool, "run: no program: xprof run [options] -- ./prog args...");
  const std::string prog = findExecutable(o.command.front());
  if (prog.empty())
    throw InputError(o.command.front(), "cannot run: no such executable file");
  const std::string hook = findHook(o);
  const std::string symbolizer = findSymbolizer(o);
  TempDir tmp;
  const std::string raw_path = tmp.path + "/hook.json";

  std::vector<std::string> env;
  const char* preload = std::getenv("LD_PRELOAD");
  env.push_back("LD_PRELOAD=" + hook + (preload && *preload ? std::string(":") + preload : ""));
  env.push_back("XPROF_HOOK_OUT=" + raw_path);
  env.push_back("XPROF_ITERATIONS=" + std::to_string(o.iterations));
  env.push_back("XPROF_WARMUP=" + std::to_string(o.warmup));
  env.push_back("XPROF_REPEATS=" + std::to_string(o.repeats));
  env.push_back(std::string("XPROF_CONSUMERS=") + (o.measure_consumers ? "1" : "0"));
  std::vector<std::string> argv = o.command;
  argv.front() = prog;
  const int status = spawn(argv, env, -1, -1, o.program_stdout_to_stderr);
  if (WIFSIGNALED(status))
    throw InputError(o.command.front(), std::string("killed by signal ") +
                                            std::to_string(WTERMSIG(status)) + " (" +
                                            strsignal(WTERMSIG(status)) + "); no profile written");
  if (WEXITSTATUS(status) != 0)
    throw InputError(o.command.front(), "exited with status " +
                                            std::to_string(WEXITSTATUS(status)) +
                                            "; no profile written");
  if (!isRegularFile(raw_path))
    throw InputError(o.command.front(),
                     "the program ran no libtorch op we could see (is it linked against "
                     "libtorch, and does it end through exit() or main's return?)");
  const nlohmann::json raw = nlohmann::json::parse(readFile(raw_path), nullptr, false);
  if (raw.is_discarded() || !raw.contains("xprof_hook"))
    throw InputError(raw_path, "the hook's record is not readable");
  formats::Profile p = formats::readProfile(formats::JsonReader(raw));
  if (p.ops.empty())
    throw InputError(o.command.front(),
                     "no op was called from the program's own code (is it built with -g, and "
                     "are its sources outside /usr?)");

  // Symbolize every frame that lies in one of the program's own objects.
  HookRecord record;
  try {
    record = readHookRecord(formats::JsonReader(raw).at("xprof_hook"), p.ops.size());
  } catch (const FormatError& e) { // another build of the hook, or a damaged record
    throw inputErrorAt(e, raw_path);
  }
  std::map<std::int64_t, std::vector<std::uint64_t>> wanted;
  for (const auto& s : record.stacks)
    for (const auto& f : s.frames)
      if (f.module >= 0 && record.modules[static_cast<std::size_t>(f.module)].user)
        wanted[f.module].push_back(f.offset);
  std::map<std::int64_t, std::map<std::uint64_t, std::vector<Symbol>>> symbols;
  for (auto& [m, offsets] : wanted) {
    std::sort(offsets.begin(), offsets.end());
    offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
    symbols[m] =
        symbolize(symbolizer, record.modules[static_cast<std::size_t>(m)].path, offsets, tmp.path);
  }
  const std::string base = o.base_dir.empty() ? fs::current_path().string() : o.base_dir;
  std::size_t resolved = 0;
  SourceLines lines;
  for (const auto& s : record.stacks) {
    formats::Op& op = p.ops[static_cast<std::size_t>(s.op)];
    const Symbol* site = nullptr;
    for (const auto& f : s.frames) {
      auto mod = symbols.find(f.module);
      if (mod == symbols.end())
        continue;
      auto at = mod->second.find(f.offset);
      if (at == mod->second.end())
        continue;
      for (const Symbol& sym : at->second) // innermost inlined frame first
        if (isUserSource(sym.file) && sym.line > 0) {
          site = &sym;
          break;
        }
      if (site)
        break;
    }
    if (!site)
      continue;
    ++resolved;
    const std::string file = relativeTo(site->file, base);
    op.source = {file, site->line, site->col, lines.at(site->file, site->line)};
    op.scope = functionWithoutParameters(site->function);
    if (s.shared_call)
      continue; // several ops came out of one call: the expression's value is only the last
    op.anchor.file = file;
    op.anchor.function = op.scope;
    op.anchor.op = op.kind;
    op.anchor.line = site->line;
    op.anchor.col = site->col;
  }
  if (resolved == 0)
    throw InputError(o.command.front(),
                     "no call site could be read from the debug info: build the program with -g");

  p.model.path = o.command.front();
  p.model.sha256 = sha256File(prog);
  p.model.format = formats::ModelFormat::LibtorchProgram;
  p.model.method = "main";
  const std::int64_t threads = p.device.threads;
  p.device = describeCpu();
  p.device.threads = threads;
  // Idle windows are moments of one call of each site: a site's duration is all its calls.
  std::vector<OpTiming> timeline;
  std::vector<formats::Op> per_call = p.ops;
  for (auto& op : per_call) {
    op.duration_ms /= static_cast<double>(std::max<std::int64_t>(1, op.runs));
    timeline.push_back({op.start_ms, op.duration_ms});
  }
  p.gpu_idle_events =
      findCpuIdleWindows(timeline, per_call, static_cast<int>(p.device.cores), o.min_window_ms);
  return p;
}

} // namespace xalloc::profiler
