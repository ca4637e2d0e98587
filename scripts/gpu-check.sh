#!/usr/bin/env bash
# On a GPU machine (a torch wheel with CUDA, nvcc, CMake; no network): builds the runtime's CUDA
# backend against python3's torch (runtime/gpu/CMakeLists.txt), runs its checks directly and
# under compute-sanitizer (memcheck, racecheck, synccheck), then its benchmark.
#   bash scripts/gpu-check.sh            # BUILD=/tmp/xalloc-gpu, LOGS=data/tmp/gpu
# Exit status: the first failing step's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-/tmp/xalloc-gpu}
logs=${LOGS:-$root/data/tmp/gpu}
mkdir -p "$logs"
python=${PYTHON:-python3}
prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
arch=${CUDA_ARCH:-$("$python" -c 'import torch; p = torch.cuda.get_device_capability(); print(f"{p[0]}{p[1]}")')}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

step() { echo "== $*"; }
step "configure against $("$python" -c 'import torch; print(torch.__version__)') (sm_$arch)"
cmake -S "$root/runtime/gpu" -B "$build" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$logs/configure.log" 2>&1 || { tail -40 "$logs/configure.log"; exit 1; }
step "build"
cmake --build "$build" -j "$(nproc)" >"$logs/build.log" 2>&1 || { grep -E "error|Error" "$logs/build.log" | head -40; exit 1; }

step "xalloc-gpu-check"
"$build/bin/xalloc-gpu-check" | tee "$logs/check.log"
# The caching allocator hides out-of-bounds accesses inside its cached blocks from memcheck.
for tool in memcheck racecheck synccheck; do
  step "compute-sanitizer --tool $tool"
  PYTORCH_NO_CUDA_MEMORY_CACHING=$([ $tool = memcheck ] && echo 1 || echo 0) \
    compute-sanitizer --tool "$tool" --error-exitcode 3 "$build/bin/xalloc-gpu-check" \
    >"$logs/sanitizer-$tool.log" 2>&1 || { tail -40 "$logs/sanitizer-$tool.log"; exit 3; }
  tail -3 "$logs/sanitizer-$tool.log"
done

step "xalloc-gpu-bench"
"$build/bin/xalloc-gpu-bench" | tee "$logs/bench.log"
