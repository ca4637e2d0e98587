#!/usr/bin/env bash
# On a GPU machine (a torch wheel with CUDA, nvcc, CMake; no Clang, no network): builds the
# runtime's CUDA backend against that machine's torch (runtime/gpu/CMakeLists.txt: the
# side-stream conversions on c10::cuda streams and events, the graceful stack over torch's CUDA
# caching allocator), runs its checks directly and under compute-sanitizer (memcheck, racecheck,
# synccheck), then its benchmark (the kernel's bandwidth, and async conversions hidden behind
# producers on idle side streams). Under 8 minutes on a 16-core GPU machine.
#   bash scripts/gpu-check.sh            # BUILD=/tmp/xalloc-gpu, LOGS=data/tmp/gpu, WERROR=ON
#   PYTHON=/path/to/python               # the torch to build against (default: python3's)
#   BUILD_ONLY=1 CUDA_ARCH=90            # only configure and build (where there is no GPU, as
#                                        # against a second environment's torch 2.11 here)
# Every step after the build runs even when one before it failed, so one run on a lent machine
# says everything; the exit status is the first failing step's.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-/tmp/xalloc-gpu}
logs=${LOGS:-$root/data/tmp/gpu}
mkdir -p "$logs"
python=${PYTHON:-python3}
prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)') || exit 1
arch=${CUDA_ARCH:-$("$python" -c 'import torch; p = torch.cuda.get_device_capability(); print(f"{p[0]}{p[1]}")')}
generator=()
keep_going=(-k)
if command -v ninja >/dev/null; then
  generator=(-G Ninja)
  keep_going=(-k 0)
fi
status=0
fail() { [ "$status" -ne 0 ] || status=$1; }
step() { echo "== $*"; }

step "configure against $("$python" -c 'import torch; print(torch.__version__)') (sm_$arch)"
cmake -S "$root/runtime/gpu" -B "$build" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DXALLOC_WERROR="${WERROR:-ON}" \
  >"$logs/configure.log" 2>&1 || { tail -40 "$logs/configure.log"; exit 1; }
step "build"
if ! cmake --build "$build" -j "$(nproc)" -- "${keep_going[@]}" >"$logs/build.log" 2>&1; then
  grep -E "error|Error" "$logs/build.log" | head -60
  exit 1
fi
echo "$(grep -c 'warning:' "$logs/build.log") warning(s) in the build"
if [[ ${BUILD_ONLY:-0} == 1 ]]; then
  echo "built: $(ls "$build/bin" | tr '\n' ' ')"
  exit 0
fi

step "xalloc-gpu-check"
"$build/bin/xalloc-gpu-check" 2>&1 | tee "$logs/check.log" || fail 2
# The caching allocator hides out-of-bounds accesses inside its cached blocks from memcheck.
for tool in memcheck racecheck synccheck; do
  step "compute-sanitizer --tool $tool"
  if XALLOC_GPU_CHECK_TOOL=$tool PYTORCH_NO_CUDA_MEMORY_CACHING=$([ $tool = memcheck ] && echo 1 || echo 0) \
    timeout "${SANITIZER_TIMEOUT:-150}" compute-sanitizer --tool "$tool" --error-exitcode 3 \
    "$build/bin/xalloc-gpu-check" >"$logs/sanitizer-$tool.log" 2>&1; then
    tail -2 "$logs/sanitizer-$tool.log"
  else
    tail -30 "$logs/sanitizer-$tool.log"
    fail 3
  fi
done

step "xalloc-gpu-bench"
"$build/bin/xalloc-gpu-bench" 2>&1 | tee "$logs/bench.log" || fail 4
exit $status
