"""x-allocator for Python: the graceful CPU allocator and the op library of rewritten models.

    import torch, xalloc
    with xalloc.graceful(limit="8G"):
        run_model()
    print(xalloc.get_stats()["num_alloc_retries"])

    m = xalloc.load("model.opt.pt")   # a model rewritten with --form fast: ops, checks, load
    xalloc.activation_cache_stats()    # its activations, kept for the next call (bounded by
                                       # XALLOC_ACTIVATION_CACHE_MB, default 256)
    xalloc.release_activation_cache()  # give the idle ones back now
"""
import contextlib
import os

import torch  # noqa: F401  (libtorch must be loaded first)

from . import _build


def _check_torch():
    """The compiled parts link the libtorch they were built against: in a process that runs
    another torch they would fail to load, or worse. One line naming both, before they load."""
    if torch.__version__ != _build.TORCH_VERSION:
        raise ImportError(f"xalloc was built against torch {_build.TORCH_VERSION}, but this "
                          f"process runs torch {torch.__version__} ({torch.__file__}): rebuild "
                          "x-allocator against this torch (XALLOC_VENV=<its environment> make "
                          "build), or run it with the torch it was built for")


_check_torch()

from . import _C  # noqa: E402
from ._C import get_stats, installed, reset_stats, uninstall  # noqa: E402,F401
from ._C import activation_cache_stats, release_activation_cache  # noqa: E402,F401


def _bytes(value):
    """1048576, "512M", "8G", "1.5GiB" -> bytes (the grammar of XALLOC_CPU_LIMIT and xsched
    --memory-budget); None stays None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"limit must be a byte count (int or str such as '8G'), not {value!r}")
    if isinstance(value, int):
        if not 0 <= value < 1 << 63:
            raise ValueError(f"limit must be a byte count from 1 to 2**63 - 1, got {value}")
        n = value
    else:
        n = parse_bytes(value)
    if n == 0:
        # A cap of 0 refuses every allocation; it used to mean no cap, without a word.
        raise ValueError(f"limit {value!r} is 0 bytes, which refuses every allocation "
                         "(None: no cap)")
    return n


def parse_bytes(text):
    """A byte size in x-allocator's one grammar ("512M", "8G", "1.5GiB") as bytes."""
    if not isinstance(text, str):
        raise TypeError(f"a byte size is a str such as '8G', not {text!r}")
    return _C.parse_bytes(text)


def _number(name, value, integer):
    """A finite non-negative number (an int when `integer`), or None; a clear one-line error
    otherwise, rather than pybind's signature listing."""
    if value is None:
        return None
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        what = "an int" if integer else "a number"
        raise TypeError(f"{name} must be {what}, not {value!r}")
    if not (value >= 0 and value != float("inf")) or (integer and value >= 1 << 31):
        raise ValueError(f"{name} must be a finite number >= 0{' below 2**31' if integer else ''}"
                         f", got {value!r}")
    return value


def install(limit_bytes=None, deadline_ms=None, max_retries=None, ledger=None, log=False):
    """Install the graceful allocator as torch's CPU allocator: the XALLOC_* variables, then
    these arguments (limit_bytes: an int or a byte size such as "8G"). Each is checked first,
    with a one-line error, and nothing is installed when one is wrong."""
    if ledger is not None and not isinstance(ledger, (str, os.PathLike)):
        raise TypeError(f"ledger must be a path, not {ledger!r}")
    _C.install(limit_bytes=_bytes(limit_bytes),
               deadline_ms=_number("deadline_ms", deadline_ms, False),
               max_retries=_number("max_retries", max_retries, True),
               ledger=None if ledger is None else os.fspath(ledger), log=bool(log))


def add_release_callback(callback):
    """callback(wanted_bytes) -> freed_bytes, called when an allocation fails, before the
    allocator waits; returns a handle for remove_release_callback. An exception it raises, or a
    result that is not an int >= 0, is reported as unraisable and counts as nothing freed."""
    if not callable(callback):
        raise TypeError(f"the release callback must be callable, not {callback!r}")
    return _C.add_release_callback(callback)


def remove_release_callback(handle):
    """Stop calling the callback add_release_callback returned `handle` for."""
    if isinstance(handle, bool) or not isinstance(handle, int):
        raise TypeError(f"a release callback's handle is the int add_release_callback returned, "
                        f"not {handle!r}")
    _C.remove_release_callback(handle)


@contextlib.contextmanager
def graceful(limit=None, deadline_ms=None, max_retries=None, ledger=None, log=False):
    """Install the graceful allocator for the duration of a `with` block."""
    install(limit_bytes=limit, deadline_ms=deadline_ms, max_retries=max_retries, ledger=ledger,
            log=log)
    try:
        yield
    finally:
        uninstall()


def library_path():
    """Path of libxalloc_runtime.so, the op library rewritten models need."""
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "libxalloc_runtime.so"),
                      os.path.join(here, "..", "..", "lib", "libxalloc_runtime.so")):
        if os.path.exists(candidate):
            return os.path.normpath(candidate)
    raise FileNotFoundError("libxalloc_runtime.so not found next to the xalloc package")


def load_ops():
    """Register x-allocator's ops with torch (torch.ops.load_library); returns the path."""
    path = library_path()
    torch.ops.load_library(path)
    return path


def load(path, map_location=None):
    """Load a TorchScript model, such as one xrewrite wrote for the fast form: the runtime's ops
    are registered first (load_ops), then every tensor of the file is checked against what the
    file holds (a damaged or hostile file is a ValueError naming the tensor, not a crash or a
    read of stray memory), then torch.jit.load(path, map_location)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a path, not {path!r}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such model file" if not os.path.exists(path)
                                else f"{path}: not a regular file")
    load_ops()
    problem = _C.check_model_file(path)
    if problem:
        raise ValueError(f"{path}: {problem}")
    try:
        return torch.jit.load(path, map_location=map_location)
    except NotImplementedError as e:
        # torch 2.x pools a graph's tensor constants at load by comparing them (aten::equal),
        # which has no meta kernel: no frozen model, rewritten or not, loads on "meta".
        raise RuntimeError(f"{path}: cannot be loaded with map_location={map_location!r}: torch "
                           f"{torch.__version__} says: {str(e).splitlines()[0]}") from None
