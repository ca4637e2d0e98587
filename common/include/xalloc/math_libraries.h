// The backend a model runs on: which BLAS, LAPACK and oneDNN libraries this process resolved.
// xprof records it in every profile, and xrewrite compares it before it trusts a schedule.
#pragma once

#include <string>
#include <vector>

namespace xalloc {

/// The libraries a model's timings depend on, as the files they resolve to with their sizes:
/// "path@bytes;...": libtorch_cpu (the wheel links its MKL and oneDNN into it), then any BLAS,
/// LAPACK or separate oneDNN this process resolved (a Debian alternative, LD_LIBRARY_PATH). A
/// consumer's timing, and whether a contiguous input changes its output bits, depend on them; a
/// copy's do not.
std::string mathLibraries();

/// The entries of a mathLibraries() string ("path@bytes" each).
std::vector<std::string> splitLibraries(const std::string& libraries);

/// An entry's path, without its size.
std::string libraryPath(const std::string& entry);

/// The BLAS named in mathLibraries() when it is Debian's reference implementation (the
/// `libblas3` alternative in a `blas/` directory), else "".
std::string referenceBlas(const std::string& libraries);

} // namespace xalloc
