// xrewrite's command line, defined once: xrewrite (the front, rewriter/launcher/main.cpp, no
// libtorch) and xrewrite-core (the TorchScript rewriter) parse it alike, so --help, --version and
// a usage error read the same from either. No libtorch here.
#pragma once

#include <optional>
#include <string>

#include "xalloc/formats/schedule.h"
#include "xalloc/rewriter/tool.h"

namespace xalloc::rewriter {

/// Parses xrewrite's argv into `o` (everything after `--` is the C++ sources' compiler flags).
/// Returns nullopt to go on, or the exit code to return now: 0 after --help/--version, 2 after a
/// usage error or a bad --form (the message printed).
std::optional<int> parseXrewriteCommandLine(int argc, char** argv, XrewriteOptions& o);

/// The checks of a TorchScript rewrite's options that need neither the model nor the schedule,
/// in the order xrewrite-core makes them (an InputError for the first that fails).
void checkModelOptions(const XrewriteOptions& o);

/// The form to write: --form, else the one the schedule was planned for, else portable (a plan
/// for the fast form written portable is warned about once, at `name`).
XrewriteOptions withForm(XrewriteOptions o, const formats::Schedule& s, const std::string& name);

/// `xrewrite --cpp`: the schedule (-s, else stdin) written into C++ sources with Clang, as a
/// unified diff, --in-place, --check or --export-fixes. No libtorch.
int runXrewriteCpp(const XrewriteOptions& o);

} // namespace xalloc::rewriter
