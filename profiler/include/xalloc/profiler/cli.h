// xprof's flags, defined once: xprof-core parses its command line with them, and so does the
// launcher (launch.h), which keys a repeated run by what they parsed to. No libtorch.
#pragma once

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

} // namespace xalloc::profiler
