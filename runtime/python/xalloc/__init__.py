"""x-allocator for Python: the graceful CPU allocator and the op library of rewritten models.

    import torch, xalloc
    with xalloc.graceful(limit="8G"):
        run_model()
    print(xalloc.get_stats()["num_alloc_retries"])

    xalloc.load_ops()   # before torch.jit.load of a model rewritten with --form fast
"""
import contextlib
import os
import re

import torch  # noqa: F401  (libtorch must be loaded first)

from ._C import (add_release_callback, get_stats, install, installed,  # noqa: F401
                 remove_release_callback, reset_stats, uninstall)

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _bytes(value):
    """1048576, "512M", "8G", "1.5GiB" -> bytes; None stays None."""
    if value is None or isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)(?:I?B)?\s*", str(value).upper())
    if not m:
        raise ValueError(f"cannot read {value!r} as a byte count (e.g. 1048576, 512M, 8G)")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


@contextlib.contextmanager
def graceful(limit=None, deadline_ms=None, max_retries=None, ledger=None, log=False):
    """Install the graceful allocator for the duration of a `with` block."""
    install(limit_bytes=_bytes(limit), deadline_ms=deadline_ms, max_retries=max_retries,
            ledger=ledger, log=log)
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
