// xalloc._C: the graceful allocator for Python (pybind11). The Python package around it
// (xalloc/__init__.py) adds the context manager and the op library loader.
#include <cmath>
#include <string>

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "xalloc/bytes.h"
#include "xalloc/runtime/install.h"

namespace py = pybind11;
using namespace xalloc::runtime;

PYBIND11_MODULE(_C, m) {
  m.doc() = "x-allocator's graceful CPU allocator";
  m.def(
      "install",
      [](std::optional<std::int64_t> limit_bytes, std::optional<double> deadline_ms,
         std::optional<int> max_retries, std::optional<std::string> ledger, bool log) {
        // Checked here too, not only in xalloc.graceful: _C.install is callable on its own.
        if (limit_bytes && *limit_bytes < 0)
          throw py::value_error("limit_bytes must not be negative, got " +
                                std::to_string(*limit_bytes));
        if (deadline_ms && !(std::isfinite(*deadline_ms) && *deadline_ms >= 0))
          throw py::value_error("deadline_ms must be a finite number of milliseconds >= 0, got " +
                                std::to_string(*deadline_ms));
        if (max_retries && *max_retries < 0)
          throw py::value_error("max_retries must not be negative, got " +
                                std::to_string(*max_retries));
        InstallOptions o = InstallOptions::fromEnvironment();
        if (limit_bytes)
          o.limit_bytes = *limit_bytes;
        if (deadline_ms)
          o.retry.deadline_ms = *deadline_ms;
        if (max_retries)
          o.retry.max_attempts = *max_retries;
        if (ledger)
          o.ledger = *ledger;
        o.log = o.log || log;
        install(o);
      },
      py::arg("limit_bytes") = py::none(), py::arg("deadline_ms") = py::none(),
      py::arg("max_retries") = py::none(), py::arg("ledger") = py::none(), py::arg("log") = false,
      "Install the graceful allocator as torch's CPU allocator (XALLOC_* variables, then "
      "these arguments).");
  m.def(
      "parse_bytes",
      [](const std::string& text) {
        if (auto bytes = xalloc::parseByteSize(text))
          return *bytes;
        throw py::value_error(xalloc::notAByteSize(text));
      },
      py::arg("text"), "A byte size in x-allocator's one grammar (512M, 8G, 1.5GiB) as bytes.");
  m.def("uninstall", &uninstall, "Put back the allocator that was there before install().");
  m.def("installed", &installed);
  m.def("get_stats", &stats, "Counters named like torch.cuda.memory_stats().");
  m.def("reset_stats", &resetStats);
  m.def(
      "add_release_callback",
      [](std::function<std::size_t(std::size_t)> cb) {
        return addReleaseCallback([cb](std::size_t wanted) {
          py::gil_scoped_acquire gil;
          return cb(wanted);
        });
      },
      "Called with the bytes wanted when an allocation fails; returns the bytes it freed.");
  m.def("remove_release_callback", &removeReleaseCallback);
}
