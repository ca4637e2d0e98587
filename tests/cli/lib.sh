# Helpers for the command-line tests. Each test sources this file.
set -euo pipefail
: "${XALLOC_BIN:?set by CTest}" "${XALLOC_SAMPLES:?}" "${XALLOC_SOURCE:?}" "${XALLOC_PYTHON:?}"
export PATH="$XALLOC_BIN:$PATH"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# A libtorch program built as users build one against the wheel (its headers, C++20, its CXX11
# ABI; torch_cpu and c10, found at run time through the RPATH).
: "${XALLOC_TORCH_PREFIX:?set by CTest}"
TORCH_CXXFLAGS=(-std=c++20 -isystem "$XALLOC_TORCH_PREFIX/include"
                -isystem "$XALLOC_TORCH_PREFIX/include/torch/csrc/api/include" -D_GLIBCXX_USE_CXX11_ABI=1)
TORCH_LDFLAGS=(-L"$XALLOC_TORCH_PREFIX/lib" -Wl,-rpath,"$XALLOC_TORCH_PREFIX/lib" -ltorch_cpu -lc10)
# Short measurement settings keep the suite fast; the benchmarks use the full ones.
QUICK=(--iterations 3 --warmup 1 --repeats 7 -q --no-db)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# The suite runs on the BLAS users run (OpenBLAS, the default install). A few checks are about
# exactness or timing that only Debian's reference BLAS shows (a transposed weight changes no
# bits there; a linear is slow enough to leave a window): they run on it, labelled, through
# on_reference_blas CMD..., and are skipped where it is not installed.
REFERENCE_BLAS_DIR=/usr/lib/x86_64-linux-gnu/blas
have_reference_blas() { [[ -e "$REFERENCE_BLAS_DIR/libblas.so.3" ]]; }
on_reference_blas() {
  LD_LIBRARY_PATH="$REFERENCE_BLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
}

# expect_error CODE PATTERN -- CMD...: runs CMD, checks its exit code, that stderr is exactly one
# line, and that the line matches PATTERN (grep -E).
expect_error() {
  local code=$1 pattern=$2
  shift 3
  local rc=0
  "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
  [[ $rc -eq $code ]] || fail "expected exit $code, got $rc from: $* ($(cat "$WORK/err.txt"))"
  [[ $(wc -l <"$WORK/err.txt") -eq 1 ]] || fail "expected one line of diagnostics from: $*; got: $(cat "$WORK/err.txt")"
  grep -Eq -- "$pattern" "$WORK/err.txt" || fail "diagnostic of '$*' does not match /$pattern/: $(cat "$WORK/err.txt")"
}

# Documents against formats/schema/: valijson (the tests' xalloc-validate) and Python's
# jsonschema (scripts/validate-schema.py, what users run), two implementations that must agree.
validate() {
  # Both read the documents: stdin ("-") is kept in a file for the second.
  local args=() a
  for a in "$@"; do
    if [[ $a == - ]]; then
      cat >"$WORK/validate-stdin.json"
      a="$WORK/validate-stdin.json"
    fi
    args+=("$a")
  done
  "$XALLOC_BIN/xalloc-validate" "${args[@]}" && "$XALLOC_PYTHON" "$XALLOC_SOURCE/scripts/validate-schema.py" "${args[@]}"
}
# The schemas refuse a bad-input fixture that the tools refuse.
schema_rejects() {
  if "$XALLOC_BIN/xalloc-validate" "$1" 2>/dev/null; then fail "the schemas accept $1"; fi
}

# What xrewrite says of a verified rewrite (grep -E): bit-identical, or within the tolerance with
# the error it measured.
VERIFIED="(outputs bit-identical to the original|outputs within [0-9.]+e[-+][0-9]+ of the original's \(measured [0-9.]+e[-+][0-9]+\))"

# same_outputs A.pt B.pt [A2.pt B2.pt ...]: each pair of models gives the same outputs on random
# inputs (Python torch, independent of xrewrite's own check): bit-identical when B records no
# tolerance or 0 (--exact), else within the tolerance its stored schedule records (max |b - a|
# over max |a| per output). One Python process for all pairs (importing torch costs ~2 s); a
# pair that differs prints "pair N: why" and the function fails.
same_outputs() {
  PYTHONPATH="${XALLOC_PYTHON_PATH:-}" "$XALLOC_PYTHON" - "$@" <<'PY'
import json, sys, torch
try:  # models rewritten in the fast form need x-allocator's ops
    import xalloc
    xalloc.load_ops()
except ImportError:
    pass
def flat(v):
    if isinstance(v, torch.Tensor): return [v]
    if isinstance(v, (tuple, list)): return [t for x in v for t in flat(x)]
    if isinstance(v, dict): return [t for k in sorted(v) for t in flat(v[k])]
    return []
def compare(pa, pb):
    files = {"xalloc/example_inputs.json": ""}
    a = torch.jit.load(pa, _extra_files=files)
    stored = {"xalloc/schedule.json": ""}
    b = torch.jit.load(pb, _extra_files=stored)
    tol = 0.0
    if stored["xalloc/schedule.json"]:
        tol = json.loads(stored["xalloc/schedule.json"])["summary"].get("tolerance", 0.0)
    spec = json.loads(files["xalloc/example_inputs.json"])["inputs"]
    for seed in range(5):
        g = torch.Generator().manual_seed(100 + seed)
        args = []
        for s in spec:
            if s["dtype"].startswith("int"):
                args.append(torch.randint(int(s.get("low", 0)), int(s.get("high", 100)), s["shape"], generator=g))
            else:
                args.append(torch.randn(s["shape"], generator=g))
        ra, rb = flat(a(*args)), flat(b(*args))
        assert len(ra) == len(rb) and len(ra) > 0
        for x, y in zip(ra, rb):
            assert x.dtype == y.dtype and x.shape == y.shape
            if tol == 0 or not x.is_floating_point():
                assert torch.equal(x.contiguous().view(torch.uint8), y.contiguous().view(torch.uint8)), "outputs differ"
            else:
                err = (x.double() - y.double()).abs().max() / x.double().abs().max()
                assert err <= tol, f"outputs differ by {err:.2e} of their scale, more than {tol}"
    return "same outputs on 5 inputs" + (f" (within {tol})" if tol else " (bit-identical)")
pairs = list(zip(sys.argv[1::2], sys.argv[2::2]))
assert pairs and len(sys.argv) % 2 == 1, "same_outputs takes pairs of models"
bad = 0
for i, (pa, pb) in enumerate(pairs):
    try:
        print(compare(pa, pb))
    except Exception as e:
        print(f"pair {i}: {pb}: {type(e).__name__}: {e}")
        bad += 1
sys.exit(1 if bad else 0)
PY
}

# same_outputs_later A.pt B.pt MESSAGE: same_outputs for this pair, made with every other pair
# by check_outputs (one Python process); the files are copied now, as they are.
LATER_PAIRS=()
LATER_MESSAGES=()
same_outputs_later() {
  local n=${#LATER_MESSAGES[@]}
  mkdir -p "$WORK/later"
  cp "$1" "$WORK/later/$n.a.pt" && cp "$2" "$WORK/later/$n.b.pt"
  LATER_PAIRS+=("$WORK/later/$n.a.pt" "$WORK/later/$n.b.pt")
  LATER_MESSAGES+=("$3")
}
# check_outputs: the pairs same_outputs_later kept; fails with the message of each that differs.
check_outputs() {
  [[ ${#LATER_PAIRS[@]} -gt 0 ]] || return 0
  same_outputs "${LATER_PAIRS[@]}" >"$WORK/later.txt" && return 0
  local i why=""
  for i in "${!LATER_MESSAGES[@]}"; do
    grep -q "^pair $i: " "$WORK/later.txt" && why+="${LATER_MESSAGES[$i]} ($(grep "^pair $i: " "$WORK/later.txt" | cut -d' ' -f3-)); "
  done
  fail "${why:-$(cat "$WORK/later.txt")}"
}

# force_syncs IN.json OUT.json: every site the profile found safe to convert (its consumers are
# listed; not an existing conversion) becomes `sync`, whatever the timings said, so a test does
# not depend on them. Fails when no site is converted.
force_syncs() {
  python3 - "$1" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for d in s["decisions"]:
    if d["action"] == "none" and d["consumers"] and d["input_anchor"] is None:
        d["action"] = "sync"
assert any(d["action"] == "sync" for d in s["decisions"]), "no site to convert"
json.dump(s, open(sys.argv[2], "w"))
PY
}

# Rewrites MODEL with SCHEDULE into OUT, where every site must be applied (none already applied,
# none lost), then runs again on OUT, which must need no change and find every site already
# applied. NAME labels the failures and the logs in $WORK.
rewrite_twice() {
  local name=$1 model=$2 schedule=$3 out=$4 applied
  xrewrite "$model" -s "$schedule" -o "$out" 2>"$WORK/$name.1.log" ||
    fail "$name: $(cat "$WORK/$name.1.log")"
  applied=$(sed -n 's/^xrewrite: \([0-9]*\) applied, 0 already applied, 0 not found.*/\1/p' "$WORK/$name.1.log")
  [[ -n "$applied" && "$applied" -gt 0 ]] || fail "$name: $(grep '^xrewrite: [0-9]' "$WORK/$name.1.log")"
  xrewrite "$out" -s "$schedule" --check 2>"$WORK/$name.2.log" ||
    fail "$name: the rewritten model still needs changes"
  grep -q "^xrewrite: 0 applied, $applied already applied, 0 not found" "$WORK/$name.2.log" ||
    fail "$name: a second run lost sites: $(grep -v ': note: ' "$WORK/$name.2.log" | head -5)"
}
