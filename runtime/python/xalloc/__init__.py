"""x-allocator for Python: the graceful CPU allocator and the op library of rewritten models.

    import torch, xalloc
    with xalloc.graceful(limit="8G"):
        run_model()
    print(xalloc.get_stats()["num_alloc_retries"])

    xalloc.load_ops()   # before torch.jit.load of a model rewritten with --form fast
"""
import contextlib
import os

import torch  # noqa: F401  (libtorch must be loaded first)

from ._C import (add_release_callback, get_stats, install, installed,  # noqa: F401
                 parse_bytes, remove_release_callback, reset_stats, uninstall)


def _bytes(value):
    """1048576, "512M", "8G", "1.5GiB" -> bytes (the grammar of XALLOC_CPU_LIMIT and xsched
    --memory-budget); None stays None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"limit must be a byte count (int or str such as '8G'), not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"limit must not be negative, got {value}")
        return value
    return parse_bytes(value)


def _number(name, value, integer):
    """A finite non-negative number (an int when `integer`), or None; a clear one-line error
    otherwise, rather than pybind's signature listing."""
    if value is None:
        return None
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        what = "an int" if integer else "a number"
        raise TypeError(f"{name} must be {what}, not {value!r}")
    if not (value >= 0 and value != float("inf")):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


@contextlib.contextmanager
def graceful(limit=None, deadline_ms=None, max_retries=None, ledger=None, log=False):
    """Install the graceful allocator for the duration of a `with` block."""
    if ledger is not None and not isinstance(ledger, (str, os.PathLike)):
        raise TypeError(f"ledger must be a path, not {ledger!r}")
    install(limit_bytes=_bytes(limit), deadline_ms=_number("deadline_ms", deadline_ms, False),
            max_retries=_number("max_retries", max_retries, True),
            ledger=None if ledger is None else os.fspath(ledger), log=bool(log))
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
