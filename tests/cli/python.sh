#!/usr/bin/env bash
# The Python package: install/uninstall, stats, the context manager, a release callback written
# in Python, an out-of-memory error with the stats, and loading the op library.
source "$(dirname "$0")/lib.sh"
: "${XALLOC_PYTHON_PATH:?set by CTest}"

PYTHONPATH="$XALLOC_PYTHON_PATH" XALLOC_DEADLINE_MS=100 "$XALLOC_PYTHON" - <<'PY' || fail "python checks"
import torch, xalloc

assert not xalloc.installed()
with xalloc.graceful(limit="64M"):
    assert xalloc.installed()
    xalloc.reset_stats()
    x = torch.ones(1 << 20)                    # 4 MiB
    y = (x * 2).sum().item()
    assert y == 2 * (1 << 20), y
    s = xalloc.get_stats()
    assert s["allocation.all.allocated"] >= 2, s
    assert s["allocated_bytes.all.current"] >= 4 << 20, s

    # A cache in Python that the allocator may ask to shrink.
    cache = [torch.empty(10 << 20)]            # 40 MiB
    def release(wanted):
        freed = sum(t.numel() * t.element_size() for t in cache)
        cache.clear()
        return freed
    cb = xalloc.add_release_callback(release)
    z = torch.zeros(10 << 20)                  # fits only once the cache is gone
    assert not cache and xalloc.get_stats()["recovered.callbacks"] == 1
    xalloc.remove_release_callback(cb)

    try:
        torch.empty(100 << 20)                 # 400 MiB over a 64 MiB cap
        raise SystemExit("allocated past the cap")
    except RuntimeError as e:
        msg = str(e).splitlines()[0]
        assert "out of memory: cannot allocate 400.0 MiB" in msg and "retries" in msg, msg
    assert xalloc.get_stats()["num_ooms"] == 1
assert not xalloc.installed()

try:
    xalloc.install(limit_bytes=None, deadline_ms=None, max_retries=None, ledger=None, log=False)
    xalloc.uninstall()
    with xalloc.graceful(limit="lots"):
        pass
    raise SystemExit("accepted limit='lots'")
except ValueError as e:
    assert "cannot read 'lots' as a byte count" in str(e)

# One grammar with XALLOC_CPU_LIMIT and xsched --memory-budget (xalloc/bytes.h).
assert xalloc.parse_bytes("2GB") == 2 << 30 and xalloc.parse_bytes("1.5KiB") == 1536
for bad, err in (("1e30G", ValueError), (True, TypeError), (-1, ValueError), (2.5, TypeError)):
    try:
        with xalloc.graceful(limit=bad):
            pass
        raise SystemExit(f"accepted limit={bad!r}")
    except err:
        pass

# The other settings: finite, non-negative, of their type; one-line errors, nothing installed.
for kwargs, err in (({"deadline_ms": -5}, ValueError), ({"deadline_ms": float("nan")}, ValueError),
                    ({"deadline_ms": float("inf")}, ValueError), ({"deadline_ms": "5"}, TypeError),
                    ({"max_retries": -1}, ValueError), ({"max_retries": 2.0}, TypeError),
                    ({"max_retries": True}, TypeError), ({"ledger": 3}, TypeError)):
    try:
        with xalloc.graceful(**kwargs):
            pass
        raise SystemExit(f"accepted {kwargs}")
    except err as e:
        assert "\n" not in str(e), str(e)
    assert not xalloc.installed(), kwargs
for kwargs in ({"deadline_ms": -1.0}, {"max_retries": -3}, {"limit_bytes": -1}):
    try:
        xalloc.install(**kwargs)
        raise SystemExit(f"_C.install accepted {kwargs}")
    except ValueError:
        pass
    assert not xalloc.installed(), kwargs
with xalloc.graceful(deadline_ms=0, max_retries=0):
    assert xalloc.installed()

# The package's functions check their arguments: a one-line TypeError or ValueError, never
# pybind's listing of signatures; install takes the byte sizes graceful takes.
for call, err in ((lambda: xalloc.add_release_callback(None), TypeError),
                  (lambda: xalloc.add_release_callback("x"), TypeError),
                  (lambda: xalloc.remove_release_callback("a"), TypeError),
                  (lambda: xalloc.parse_bytes(5), TypeError),
                  (lambda: xalloc.install(limit_bytes=1 << 70), ValueError),
                  (lambda: xalloc.install(max_retries=1 << 40), ValueError),
                  (lambda: xalloc.install(log=False, ledger=3), TypeError)):
    try:
        call()
        raise SystemExit("accepted a bad argument")
    except err as e:
        assert "\n" not in str(e) and "incompatible function arguments" not in str(e), str(e)
    assert not xalloc.installed()
xalloc.install(limit_bytes="64M")
xalloc.uninstall()

# A release callback that raises, or returns what is not a byte count, is reported as
# unraisable and counts as nothing freed: the allocation goes on down the ladder and ends in the
# allocator's own out-of-memory error, not the callback's.
import sys
reported = []
sys.unraisablehook = lambda u: reported.append(u.exc_value)
with xalloc.graceful(limit="64M", deadline_ms=20):
    def raises(wanted):
        raise KeyError("boom")
    for cb in (raises, lambda wanted: "lots", lambda wanted: -5, lambda wanted: None):
        handle = xalloc.add_release_callback(cb)
        try:
            torch.empty(100 << 20)
            raise SystemExit("allocated past the cap")
        except RuntimeError as e:
            assert "out of memory: cannot allocate 400.0 MiB" in str(e), str(e)
        xalloc.remove_release_callback(handle)
kinds = [type(e).__name__ for e in reported]
assert kinds == ["KeyError", "TypeError", "TypeError", "TypeError"], reported
assert "returns the bytes it freed" in str(reported[1]), reported[1]

# The allocator's edges (issue "A fast form users can deploy", item 11). Blocks nest as a stack:
# leaving the inner one keeps the outer one's cap (it uninstalled the outer one).
with xalloc.graceful(limit="32M", deadline_ms=20):
    with xalloc.graceful(limit="256M", deadline_ms=20):
        big = torch.empty(40 << 20)            # 160 MiB: within the inner cap
        del big
    assert xalloc.installed(), "leaving the inner block uninstalled the outer one"
    try:
        torch.empty(40 << 20)
        raise SystemExit("the outer cap was gone after the inner block")
    except RuntimeError as e:
        assert "out of memory" in str(e), e
assert not xalloc.installed()
# A callback added before install is called (it was silently never called).
held = [torch.empty(10 << 20)]
called = []
def give_back(wanted):
    called.append(wanted)
    freed = sum(t.numel() * t.element_size() for t in held)
    held.clear()
    return freed
h = xalloc.add_release_callback(give_back)
with xalloc.graceful(limit="64M", deadline_ms=20):
    held = [torch.empty(10 << 20)]
    z = torch.zeros(10 << 20)
    assert called and not held, "a callback added before install was never called"
    del z
xalloc.remove_release_callback(h)
# A callback that allocates does not send the ladder round again (498 times, 4.2 s past a
# 0.3 s deadline).
import time
rounds = []
def greedy(wanted):
    rounds.append(wanted)
    return torch.empty(30 << 20).numel() * 4
h = xalloc.add_release_callback(greedy)
with xalloc.graceful(limit="64M", deadline_ms=300):
    t0 = time.monotonic()
    try:
        torch.empty(30 << 20)
        raise SystemExit("allocated past the cap")
    except RuntimeError:
        pass
    assert len(rounds) == 1 and time.monotonic() - t0 < 3, (len(rounds), time.monotonic() - t0)
xalloc.remove_release_callback(h)
# A limit of 0, or one that rounds to 0 bytes, is refused (it meant no cap).
for bad in (0, "0", "0.4"):
    try:
        with xalloc.graceful(limit=bad):
            pass
        raise SystemExit(f"accepted limit={bad!r}")
    except ValueError as e:
        assert "0 bytes" in str(e), e
# reset_stats() with live tensors: counts stay non-negative.
with xalloc.graceful(limit="64M"):
    live = torch.empty(1 << 20)
    xalloc.reset_stats()
    del live
    s = xalloc.get_stats()
    assert s["allocation.all.current"] >= 0 and s["allocated_bytes.all.current"] >= 0, s

assert xalloc.load_ops().endswith("libxalloc_runtime.so")

# One oneDNN and one OpenMP in the process (issue "Current PyTorch", item 3): the runtime takes
# torch's own (oneDNN inside libtorch_cpu, the wheel's libgomp), and brings no second copy.
import os
maps = {line.split()[-1] for line in open("/proc/self/maps") if "/" in line}
gomp = sorted(p for p in maps if os.path.basename(p).startswith(("libgomp", "libiomp", "libomp")))
dnnl = sorted(p for p in maps if os.path.basename(p).startswith(("libdnnl", "libmkldnn")))
torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
assert len(gomp) == 1 and os.path.dirname(gomp[0]) == torch_lib, gomp
assert not dnnl, dnnl
print("python: ok")
PY

# A model file written by a newer torch: which versions, in one line, nothing loaded (it was
# "not a TorchScript model (... truncated or another kind of file?)").
PYTHONPATH="$XALLOC_PYTHON_PATH" "$XALLOC_PYTHON" - "$WORK" <<'PY' || fail "a model file of a newer torch"
import sys, zipfile, torch, xalloc
work = sys.argv[1]
torch.jit.save(torch.jit.trace(torch.nn.ReLU(), torch.randn(3)), f"{work}/ok.pt")
src = zipfile.ZipFile(f"{work}/ok.pt")
with zipfile.ZipFile(f"{work}/newer.pt", "w", zipfile.ZIP_STORED) as out:
    for info in src.infolist():
        data = src.read(info.filename)
        out.writestr(info, b"99\n" if info.filename.endswith("/version") else data)
try:
    xalloc.load(f"{work}/newer.pt")
    raise SystemExit("loaded a file of a newer format")
except ValueError as e:
    msg = str(e)
    assert "\n" not in msg and "newer PyTorch" in msg and "version is 99" in msg, msg
    assert f"torch {torch.__version__.split('+')[0]}" in msg, msg
print("newer file: ok")
PY
expect_error 2 "newer\.pt: .*newer PyTorch .*version is 99" -- xprof "$WORK/newer.pt" -o "$WORK/newer.json"
[[ ! -e "$WORK/newer.json" ]] || fail "xprof wrote a profile of a file it could not read"

# The package built against one torch, imported under another: one line naming both, before
# its compiled part (which links the other libtorch) is loaded.
mkdir -p "$WORK/other/xalloc"
cp "$XALLOC_PYTHON_PATH"/xalloc/*.py "$WORK/other/xalloc/"
echo 'TORCH_VERSION = "2.0.0+elsewhere"' >"$WORK/other/xalloc/_build.py"
PYTHONPATH="$WORK/other" "$XALLOC_PYTHON" -c 'import xalloc' 2>"$WORK/other.err" && fail "imported a build of another torch"
grep -q "ImportError: xalloc was built against torch 2.0.0+elsewhere, but this process runs torch" "$WORK/other.err" ||
  fail "another torch's build: $(tail -1 "$WORK/other.err")"
