#!/usr/bin/env bash
# Installs the Debian packages x-allocator needs. Idempotent and quiet when everything is present.
# Used by `make deps` (and so by every build) and by .ci/run. glpk-utils and coinor-cbc are
# only used by the tests, to check the scheduler's exact solver against an ILP solver;
# clang-tidy-14 only by `make check` (scripts/tidy.sh) and `make bench` (xrewrite's speed is
# compared with it); libvalijson-dev and
# python3-yaml only by the tests (the schemas through valijson; --export-fixes read by PyYAML).
# libopenblas0-pthread is the backend: installing it makes Debian's libblas.so.3 alternative point
# at OpenBLAS, which libtorch then runs on, as deployments do. libblas3 (the reference BLAS) stays
# installed beside it for the few labelled checks that need it (tests/cli/lib.sh). torchvision
# gives `make bench-peer` its public models. libdnnl-dev (oneDNN, the same libdnnl.so.2 libtorch
# runs on) builds the runtime's packed convolutions for channels-last regions.
set -euo pipefail

PACKAGES=(
  build-essential cmake ccache git clang-format
  libtorch-dev python3-torch python3-torchvision
  libopenblas0-pthread libblas3 libdnnl-dev
  libclang-cpp14-dev libclang-14-dev llvm-14-dev clang-14 clang-tidy-14
  nlohmann-json3-dev libeigen3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev
  pybind11-dev python3-dev
  python3-jsonschema python3-yaml libvalijson-dev
  glpk-utils coinor-cbc
)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: error: need root or sudo to install packages" >&2; exit 2; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done" >&2
