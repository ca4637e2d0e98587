// xprof's launcher (profiler/launcher/main.cpp) answers a repeated `xprof MODEL ...` from the
// timing database without loading libtorch, whose start-up alone (~0.35 s here) is most of a
// second run's time; anything else it hands to xprof-core. This is the part both share; it
// needs no libtorch.
//
// An invocation is keyed by its arguments (less -o and -q), the working directory, the contents
// of every argument that names a file (the model, an input file; not the output nor the
// database), the thread environment, and the scope: the CPU (name, cores, caches), libtorch's
// and x-allocator's versions, the BLAS, LAPACK and oneDNN files the loader finds, and xprof-core's
// own file and the runtime library's (a rebuilt core or runtime starts afresh). The launcher passes
// the key to xprof-core in XPROF_LAUNCH_KEY; xprof-core, when it has a finished profile in the
// database (the database on, no --trace), stores under the key where that profile is. The
// launcher reads it from there and writes it as xprof-core writes a reused profile, so the two
// answers are the same bytes, also after xprof-core replaced the profile.
#pragma once

#include <optional>
#include <string>

#include "xalloc/formats/profile.h"
#include "xalloc/math_libraries.h"
#include "xalloc/profiler/tool.h"

namespace xalloc::profiler::launch {

inline constexpr const char* kKeyEnv = "XPROF_LAUNCH_KEY";

struct Invocation {
  bool memoizable = false; // a TorchScript profile with the database on and no trace
  std::string db_path;     // --db, or the default
  std::string output;      // -o/--output ("" = stream mode)
  bool quiet = false;
  std::string key;
};

/// What the launcher needs of a TorchScript profile's options, as parsed (cli.h); `core` is
/// xprof-core's path. Not memoizable: --no-db, --trace (`xprof run` is never asked).
Invocation inspect(const XprofOptions& o, const std::string& core);

/// A file's size and modification time ("?" where there is none): a rebuilt file, a new scope.
std::string fileStamp(const std::string& path);
/// The runtime library xprof-core runs the fast form's ops with, beside it (bin/../lib): its
/// packed and blocked kernels are in every region's timing, so a rebuilt one measures afresh.
std::string runtimeBeside(const std::string& core);

/// Where xprof-core's finished profile for an invocation is: its database scope and key, and
/// the invocation's model and input file as written.
struct Answer {
  std::string device, library, memo_key, model, input_file;
};

/// Stores `a` under the launcher's `key` (a database it cannot open is ignored).
void store(const std::string& db_path, const std::string& key, const Answer& a);

/// The profile xprof-core would write for `key` by reusing its finished profile, if the
/// database holds both.
std::optional<formats::Profile> lookup(const std::string& db_path, const std::string& key);

/// A finished profile read back from the database as the invocation's: its model and input file
/// as given, the database's path, every measurement counted as reused. nullopt when `body` is
/// damaged or from an older format.
std::optional<formats::Profile> reusedProfile(const std::string& body, const std::string& model,
                                              const std::string& input_file,
                                              const std::string& db_path);

/// xprof's summary on stderr, up to " -> OUTPUT".
std::string summaryLine(const formats::Profile& p);

/// The note xprof prints when the profile ran on Debian's reference BLAS (linears several times
/// slower than with an optimized one, which changes what pays); "" otherwise.
std::string referenceBlasNote(const formats::Profile& p);

/// The note xprof prints for a TorchScript model that is not frozen, saying what freezing it
/// would enable (its weights made constants once, batch norms folded, weights re-laid at rewrite
/// time); "" for frozen models, programs, and models with nothing freezing would change.
std::string freezeNote(const formats::Profile& p);

} // namespace xalloc::profiler::launch
