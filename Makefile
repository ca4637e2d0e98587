# x-allocator. `make rewrite` installs what is missing, builds, profiles the bundled samples
# (MinimalGPT and SmallCNN) frozen, plans for the fast form, rewrites them and times each against
# the original and the peer; `make test` builds and runs the tests. `make help` lists every target.
#
#   MODEL=path/to/model.pt make profile rewrite     # the same on any TorchScript file
#   INPUTS="--input-shape 1x3x224x224"               # when the model stores no example inputs
#   SHAPES="8x3x224x224"                             # other shapes the plan must hold at
#   LOAD_LIBRARY=path/to/ops.so                      # custom ops the model calls (torchvision's
#                                                    # are found and loaded by the tools)

BUILD_DIR  ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
OUT        ?= data/tmp
MODEL      ?=
INPUTS     ?=
SHAPES     ?=
LOAD_LIBRARY ?=
# One thread for libtorch and OpenBLAS together: what the profile measures at and the timing runs
# at (a schedule holds for the thread count it was measured at).
THREADS    ?= 1
# The model profiled and rewritten frozen (as torch.jit.freeze does: weights are constants whose
# layout changes once), planned for the fast form (the runtime's packed convolutions and linears;
# the rewritten model needs libxalloc_runtime.so loaded). PLAN_FLAGS=--form portable and
# PROFILE_FLAGS= REWRITE_FLAGS= keep to aten:: ops and an unfrozen model.
PROFILE_FLAGS ?= --freeze
PLAN_FLAGS    ?= --form fast
REWRITE_FLAGS ?= --freeze
BIN        := $(BUILD_DIR)/bin
MODELS      = $(or $(MODEL),$(BUILD_DIR)/samples/minigpt.pt $(BUILD_DIR)/samples/smallcnn.pt)
PIPELINE    = BIN=$(BIN) OUT=$(OUT) INPUTS="$(INPUTS)" SHAPES="$(SHAPES)" THREADS=$(THREADS) \
              LOAD_LIBRARY="$(LOAD_LIBRARY)" \
              PROFILE_FLAGS="$(PROFILE_FLAGS)" PLAN_FLAGS="$(PLAN_FLAGS)" \
              REWRITE_FLAGS="$(REWRITE_FLAGS)" bash scripts/rewrite.sh
CMAKE_ARGS ?=
# The project's Python environment (scripts/install-deps.sh builds it from requirements.txt):
# its torch is the libtorch everything builds against, and the Python the tests and benchmarks run.
XALLOC_VENV ?= $(HOME)/.cache/x-allocator/venv
export XALLOC_VENV
PYTHON     := $(XALLOC_VENV)/bin/python

.DEFAULT_GOAL := help
.PHONY: help deps print-python configure tools build samples profile rewrite rewrite-cpp test bench bench-peer bench-families check fuzz format clean

help: ## show this list
	@echo "x-allocator: decide where PyTorch tensors should be made contiguous, and rewrite the model."
	@echo
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo
	@echo "  MODEL=path.pt (any TorchScript file; default: the samples), INPUTS=\"--input-shape ...\""
	@echo "  when it stores no example inputs, THREADS=$(THREADS), OUT=$(OUT), BUILD_TYPE=$(BUILD_TYPE)"

deps: ## install the Debian packages and the pinned Python environment (quiet when all are present)
	@bash scripts/install-deps.sh

print-python: ## print the absolute path of the project's Python (the pinned torch's), nothing else
	@bash scripts/install-deps.sh --print-python

configure: deps
	@test -f $(BUILD_DIR)/CMakeCache.txt || cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DXALLOC_PYTHON=$(PYTHON) $(CMAKE_ARGS)

tools: configure ## build only what `make rewrite` runs: the four tools, the samples, xbench-peer
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target tools

build: configure ## build the tools, the runtime, the samples and the tests (build/bin/)
	@cmake --build $(BUILD_DIR) -j $(JOBS)

samples: configure ## script MinimalGPT and the test models, build minigpt_cpp
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target samples

profile: tools ## profile MODEL (default: the samples) frozen: OUT/<name>.profile/cost/schedule.json
	@$(PIPELINE) profile $(MODELS)

rewrite: profile ## rewrite it: OUT/<name>.opt.pt, its graph diff, and its time against the original and the peer
	@$(PIPELINE) rewrite $(MODELS)

rewrite-cpp: tools ## the C++ path on minigpt_cpp: profile, decide, print the patch, build it and time it against the original
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target minigpt_cpp xprof_hook
	@BIN=$(BIN) BUILD=$(BUILD_DIR) OUT=$(OUT) THREADS=$(THREADS) PYTHON=$(PYTHON) bash scripts/rewrite-cpp.sh

test: build ## build and run the test suite (unit and command-line tests; the slow checks are `make check`)
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -LE check

check: build ## the slow checks CI runs: clang-tidy, the ASan+UBSan builds (unit tests, packed kernels), the fuzzers
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -L check
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target xalloc_asan_packed_tests
	@ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 $(BIN)/xalloc_asan_packed_tests --gtest_brief=1

bench: build ## original vs rewritten latency, side by side, for the sample and test models
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target bench-tools
	@BIN=$(BIN) SAMPLES=$(BUILD_DIR)/samples OUT=$(OUT)/bench bash bench/run.sh

bench-peer: build ## original / peer / ours on public models (C++), then with ONNX Runtime in Python, at one thread and at MORE_THREADS (2)
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target bench-tools
	@BIN=$(BIN) SAMPLES=$(BUILD_DIR)/samples OUT=$(OUT)/bench-peer PY=$(PYTHON) bash bench/peer.sh

bench-families: tools ## detectors, segmenters and video models: xprof's time, original / peers / ours in fresh processes
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target xalloc_python
	@BIN=$(BIN) OUT=$(OUT)/bench-families PY=$(PYTHON) bash bench/families.sh

FUZZ_SECONDS ?= 60
fuzz: ## libFuzzer on the document readers, stream, byte sizes, anchors (clang-14, ASan+UBSan): FUZZ_SECONDS each
	@CXX=clang++-14 CC=clang-14 cmake -S fuzz -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build build-fuzz -j $(JOBS)
	@bash scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS)

format: ## clang-format every C++ file in place
	@git ls-files '*.cpp' '*.h' '*.h.in' '*.cu' | xargs clang-format -i

clean: ## remove the build and the generated data
	rm -rf $(BUILD_DIR) $(OUT)
