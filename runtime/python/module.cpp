// xalloc._C: the graceful allocator for Python (pybind11). The Python package around it
// (xalloc/__init__.py) adds the context manager and the op library loader.
#include <cmath>
#include <memory>
#include <string>

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <caffe2/serialize/file_adapter.h>
#include <torch/csrc/jit/serialization/import.h>

#include "xalloc/bytes.h"
#include "xalloc/error.h"
#include "xalloc/runtime/activation_cache.h"
#include "xalloc/runtime/install.h"
#include "xalloc/runtime/model_check.h"

namespace py = pybind11;
using namespace xalloc::runtime;

PYBIND11_MODULE(_C, m) {
  m.doc() = "x-allocator's graceful CPU allocator";
  m.def(
      "install",
      [](std::optional<std::int64_t> limit_bytes, std::optional<double> deadline_ms,
         std::optional<int> max_retries, std::optional<std::string> ledger, bool log) {
        // Checked here too, not only in xalloc.graceful: _C.install is callable on its own.
        if (limit_bytes && *limit_bytes <= 0)
          throw py::value_error("limit_bytes must be at least 1 byte (None: no cap), got " +
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
  m.def(
      "check_model_file",
      [](const std::string& path) {
        std::shared_ptr<caffe2::serialize::ReadAdapterInterface> in;
        try {
          in = std::make_shared<caffe2::serialize::FileAdapter>(path);
        } catch (const c10::Error& e) {
          return "cannot be read: " + xalloc::firstLine(e.what_without_backtrace());
        }
        if (std::string why = modelFileProblem(in); !why.empty())
          return why;
        try {
          return modelTensorProblem(torch::jit::load(in, c10::Device(c10::kCPU)));
        } catch (const c10::Error& e) {
          return "cannot load TorchScript model: " + xalloc::firstLine(e.what_without_backtrace());
        }
      },
      py::arg("path"),
      "What is wrong with the tensors of the TorchScript file at path ('' when nothing).");
  m.def("uninstall", &uninstall, "Put back the allocator that was there before install().");
  m.def("installed", &installed);
  m.def("get_stats", &stats, "Counters named like torch.cuda.memory_stats().");
  m.def("reset_stats", &resetStats);
  m.def(
      "add_release_callback",
      [](py::object cb) {
        if (!PyCallable_Check(cb.ptr()))
          throw py::type_error("the release callback must be callable, not " +
                               std::string(py::str(py::repr(cb))));
        // Runs inside an allocation that failed, maybe on a thread with no Python caller: an
        // exception or a result that is not a byte count is reported as unraisable (as Python
        // reports an error in __del__) and counts as nothing freed; the allocation goes on
        // down the retry ladder.
        // Let go with the GIL held, and not at all once the interpreter is gone (the allocator
        // outlives it at exit).
        std::shared_ptr<py::object> shared(new py::object(std::move(cb)), [](py::object* o) {
          if (Py_IsInitialized()) {
            py::gil_scoped_acquire gil;
            delete o;
          } else {
            o->release();
            delete o;
          }
        });
        return addReleaseCallback([shared](std::size_t wanted) -> std::size_t {
          py::gil_scoped_acquire gil;
          try {
            py::object freed = (*shared)(wanted);
            if (!PyLong_Check(freed.ptr()) || PyBool_Check(freed.ptr()) ||
                freed.cast<long long>() < 0)
              throw py::type_error("a release callback returns the bytes it freed (an int >= 0), "
                                   "not " +
                                   std::string(py::str(py::repr(freed))));
            return static_cast<std::size_t>(freed.cast<long long>());
          } catch (py::error_already_set& e) {
            e.discard_as_unraisable(*shared);
          } catch (const std::exception& e) {
            PyErr_SetString(PyExc_TypeError, e.what());
            PyErr_WriteUnraisable(shared->ptr());
          }
          return 0;
        });
      },
      py::arg("callback"),
      "Called with the bytes wanted when an allocation fails; returns the bytes it freed.");
  m.def("remove_release_callback", &removeReleaseCallback, py::arg("handle"));
  m.def(
      "activation_cache_stats",
      [] {
        const ActivationCacheStats s = activationCacheStats();
        py::dict d;
        d["hits"] = s.hits;
        d["misses"] = s.misses;
        d["trims"] = s.trims;
        d["idle_bytes"] = s.idle_bytes;
        d["peak_idle_bytes"] = s.peak_idle_bytes;
        d["live_bytes"] = s.live_bytes;
        d["workspace_bytes"] = s.workspace_bytes;
        d["limit_bytes"] = s.limit_bytes;
        d["reserved_bytes"] = s.reserved_bytes;
        d["installed"] = activationCacheInstalled();
        return d;
      },
      "The counters of the activation arena rewritten models allocate from.");
  m.def("release_activation_cache", &releaseActivationCache,
        "Give back the pages of the activation arena's free blocks; returns their bytes.");
}
