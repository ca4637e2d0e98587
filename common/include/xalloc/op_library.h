// Loading a project's custom ops into the process, as torch.ops.load_library does: what xprof,
// xrewrite and the benchmarks do with --load-library before they load a model that calls them.
#pragma once

#include <string>

namespace xalloc {

/// Loads a shared library of custom ops (`TORCH_LIBRARY` registrations: torchvision's `_C` module,
/// a project's own ops) into the process with its symbols global, as `torch.ops.load_library`
/// does, so TorchScript models that call them load and run. Throws InputError("path", reason)
/// when the file is missing or the loader refuses it.
void loadOpLibrary(const std::string& path);

/// The file of torchvision's op library (`torchvision::nms`, `roi_align`, ...): the path in
/// XALLOC_TORCHVISION_LIBRARY when set, else the first `torchvision/_C*.so` under Python's
/// package folders: the site-packages of the torch the tools link (the project's environment),
/// then Debian's /usr/lib/python3/dist-packages and /usr/local/lib/python3*/{dist,site}-packages.
/// "" when there is none.
std::string findTorchvisionLibrary();

} // namespace xalloc
