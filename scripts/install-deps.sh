#!/usr/bin/env bash
# Installs what x-allocator needs: the Debian packages below, and the project's Python environment
# (torch, torchvision, onnxruntime, onnx and the test tools at the versions requirements.txt pins).
# Idempotent and quiet when everything is present; messages go to stderr. Used by `make deps` (and
# so by every build and `make -s print-python`) and by .ci/run.
#
# The environment lives outside the tree, so that every clone (CI's included) finds it:
# $XALLOC_VENV, by default ~/.cache/x-allocator/venv. It is built once per requirements.txt (its
# SHA-256 is stamped inside); pip keeps its wheels in its own cache (~/.cache/pip), so rebuilding
# after a change of pin downloads only what changed. The torch wheel carries libtorch: CMake finds
# it through this Python (torch.utils.cmake_prefix_path), with its own oneDNN and OpenMP. Debian's
# libtorch-dev, python3-torch and libdnnl-dev are not used.
#
# Debian: glpk-utils and coinor-cbc only serve the tests (the scheduler's exact solver checked
# against an ILP solver); clang-tidy-14 `make check` (scripts/tidy.sh) and `make bench`;
# libvalijson-dev the tests (the schemas through valijson). python3-venv and python3-dev make the
# environment and build the Python module against it. libopenblas0-pthread and libblas3 back
# numpy-free checks of the tests (tests/cli/lib.sh); the wheel's libtorch has its own BLAS (MKL).
#
#   scripts/install-deps.sh                 install what is missing
#   scripts/install-deps.sh --print-python  ... then print the environment's python (only that)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ccache git clang-format
  python3-venv python3-dev pybind11-dev
  libopenblas0-pthread libblas3
  libclang-cpp14-dev libclang-14-dev llvm-14-dev clang-14 clang-tidy-14 libclang-rt-14-dev
  nlohmann-json3-dev libeigen3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev
  libvalijson-dev
  glpk-utils coinor-cbc
)

print_python=0
case "${1:-}" in
"") ;;
--print-python) print_python=1 ;;
*)
  echo "install-deps: error: unknown option '$1' (expected --print-python)" >&2
  exit 2
  ;;
esac

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  SUDO="sudo"
fi

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "install-deps: installing ${missing[*]}" >&2
  if [[ -n $SUDO ]] && ! command -v sudo >/dev/null; then
    echo "install-deps: error: need root or sudo to install packages" >&2
    exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >&2
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: Debian packages done" >&2
fi

# --- the Python environment ----------------------------------------------------------------------
venv="${XALLOC_VENV:-$HOME/.cache/x-allocator/venv}"
want=$(sha256sum requirements.txt | cut -d' ' -f1)
stamp="$venv/.xalloc-requirements"
if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  echo "install-deps: building the Python environment $venv from requirements.txt" >&2
  mkdir -p "$(dirname "$venv")"
  [[ -x "$venv/bin/python" ]] || /usr/bin/python3 -m venv "$venv" >&2
  # A failed install leaves no stamp: the next run tries again.
  rm -f "$stamp"
  "$venv/bin/python" -m pip install --disable-pip-version-check -q -r requirements.txt >&2
  "$venv/bin/python" - <<'PY' >&2
import importlib.metadata as md, re, sys
bad = []
for line in open("requirements.txt"):
    m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
    if m and md.version(m.group(1)) != m.group(2):
        bad.append(f"{m.group(1)} {md.version(m.group(1))} (pinned {m.group(2)})")
if bad:
    sys.exit("install-deps: error: the environment does not hold the pins: " + ", ".join(bad))
PY
  echo "$want" >"$stamp"
  echo "install-deps: Python environment done" >&2
fi
if [[ $print_python == 1 ]]; then
  echo "$venv/bin/python"
fi
