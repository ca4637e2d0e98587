// xprof's flags, defined once: xprof-core parses its command line with them, and so does the
// launcher (launch.h), which keys a repeated run by what they parsed to. No libtorch.
#pragma once

#include <optional>

#include "xalloc/profiler/tool.h"

namespace CLI {
class App;
}

namespace xalloc::profiler {

/// `xprof MODEL [options]`: every flag of a TorchScript profile, into `o`.
void defineXprofOptions(CLI::App& app, XprofOptions& o);

/// `xprof run [options] -- ./prog args...`: the flags of a program's profile, into `o`; the
/// program and its arguments are what the app leaves over (takeProgram).
void defineXprofRunOptions(CLI::App& app, XprofRunOptions& o);

/// After parsing with defineXprofRunOptions: the program and its arguments into `o`.
void takeProgram(CLI::App& app, XprofRunOptions& o);

/// `xprof MODEL ...` parsed into `o`, as xprof-core and the launcher both do. Returns nullopt to
/// go on, or the exit code to return now: 0 after --help/--version, 2 after a usage error (the
/// message printed).
std::optional<int> parseXprofCommandLine(int argc, char** argv, XprofOptions& o);

/// `xprof run ...` (argv[1] is "run") parsed into `o`, the program taken; as above.
std::optional<int> parseXprofRunCommandLine(int argc, char** argv, XprofRunOptions& o);

/// The checks of a profile's options that need no model, in the order xprof-core makes them
/// (--sweep-max-bytes read into `o`, the output's folder); an InputError for the first that fails.
void checkXprofOptions(XprofOptions& o);

} // namespace xalloc::profiler
