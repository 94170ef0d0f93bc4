# Thin wrapper over scripts/setup.sh, CMake and CTest. The two commands that matter (the README
# runs each as `bash scripts/setup.sh && make ...`, which also works where make is not installed):
#   make demo   install what is missing, build, run the showcase (CPU kernels, then a real detector on the NPU simulator)
#   make test   install what is missing, build (warnings are errors), run every test
#   make demo-fresh / make test-fresh   the README's two commands, as written, on a pristine Debian 12 root
#               (scripts/fresh_machine.sh: mmdebstrap, a clean clone of HEAD, everything torn down after)
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=
# Batched translation units (CMAKE_UNITY_BUILD) for the builds from scratch: the fresh machine's,
# the sanitizer's and the aarch64 cross build (docs/design-decisions.md, "Unity builds");
# UNITY=OFF for incremental work, where a batch recompiles with each of its files.
UNITY ?= ON

.PHONY: deps build install package demo test demo-fresh test-fresh test-isa test-sanitize test-aarch64 bench bench-models fuzz models clean format format-check

deps:
	bash scripts/setup.sh

build: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DRKD_WERROR=ON -DCMAKE_UNITY_BUILD=$(UNITY) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# The rkdeploy binary on PATH (PREFIX/bin), the target profiles in PREFIX/share/rkdeploy, the
# embeddable runtime (librkdeploy_rt, shared and static), its headers (PREFIX/include/rkdeploy)
# and pkg-config file (rkdeploy_rt.pc), the Python package (PREFIX/lib/python3.X/dist-packages:
# docs/python.md).
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)
	@if [ "$$(id -u)" = 0 ]; then ldconfig; fi

# Debian packages (rkdeploy, librkdeploy-rt0, librkdeploy-rt-dev, python3-rkdeploy, rkdeploy-rknn-plugins) of the build in $(BUILD).
package: build
	cd $(BUILD) && cpack -G DEB

PHOTO ?= /usr/lib/python3/dist-packages/skimage/data/astronaut.png
demo: build
	@[ -f $(BUILD)/models/deimv2_s_arch_discrete.onnx ] || /usr/bin/python3 scripts/models/make_models.py $(BUILD)/models --models deim,deim_discrete --quiet
	./$(BUILD)/src/cli/rkdeploy demo --models $(BUILD)/models --photo $(PHOTO) --draw $(BUILD)/demo.png
	bash scripts/demo_npu.sh $(BUILD) $(PHOTO)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The README's commands on a machine that never saw this project (see scripts/fresh_machine.sh).
demo-fresh:
	bash scripts/fresh_machine.sh --readme demo
test-fresh:
	bash scripts/fresh_machine.sh --readme test

# Only the runs under instruction-set ceilings (label isa; `make test` includes them).
test-isa: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L isa

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer, at -O0 -g1 (line tables:
# reports keep file:line): measured on the 2-vCPU Xeon as a unity build, compiling takes 383 s
# at -O0 and 732 s at -O1, the tests 310 s and 116 s (docs/design-decisions.md, "CI time").
SAN_FLAGS ?= -O0 -g1 -DNDEBUG
test-sanitize: deps
	cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRKD_WERROR=ON \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(SAN_FLAGS)" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$(SAN_FLAGS)" \
	  -DRKD_ASAN=ON -DRKD_UBSAN=ON -DRKD_ENABLE_BENCH=OFF -DCMAKE_UNITY_BUILD=$(UNITY)
	cmake --build build-san -j $(JOBS)
	cd build-san && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -L unit

# The x86-64 rkdeploy the arm64 outputs are compared with: the sanitizer build's when CI made it
# (test-sanitize runs first), else the Release build's (built if missing).
HOST_RKDEPLOY ?= $(firstword $(wildcard build-san/src/cli/rkdeploy) build/src/cli/rkdeploy)

# Cross-build the whole toolkit (executor, simulator, CLI) for aarch64 against an arm64 Debian
# sysroot (scripts/arm64-sysroot.sh) and run every unit test under qemu-user (the Cortex-A76
# model: the NEON paths the boards run), then a real detector end to end: blazeface float
# against TensorFlow.js, int8 and sim byte-identical to x86-64 (tests/cli/test_arm64_parity.sh), and
# the arm64 Debian packages installed and their example run (tests/cli/test_package.sh).
# Correctness only; qemu times are not benchmarks.
test-aarch64:
	bash scripts/setup.sh --cross
	bash scripts/arm64-sysroot.sh $(CURDIR)/build-aarch64-sysroot
	@# A tree configured with another toolchain file (the former multiarch one) is made anew.
	@if grep -qs 'aarch64-linux-gnu.cmake' build-aarch64/CMakeFiles/*/CMakeSystem.cmake; then rm -rf build-aarch64; fi
	@[ -x "$(HOST_RKDEPLOY)" ] || $(MAKE) build
	cmake -S . -B build-aarch64 -G Ninja -DCMAKE_BUILD_TYPE=Release -DRKD_WERROR=ON \
	  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-sysroot.cmake -DRKD_ARM64_SYSROOT=$(CURDIR)/build-aarch64-sysroot \
	  -DRKD_ENABLE_BENCH=OFF -DRKD_HOST_RKDEPLOY=$(CURDIR)/$(HOST_RKDEPLOY) -DCMAKE_UNITY_BUILD=$(UNITY)
	cmake --build build-aarch64 -j $(JOBS)
	cd build-aarch64 && ctest --output-on-failure -j $(JOBS) -L unit
	cd build-aarch64 && ctest --output-on-failure -j $(JOBS) -R '^(human_models|arm64_parity|package)$$|TfjsModel.*blazeface'

# Google Benchmark + peers (PyTorch, ONNX Runtime) in the same run; see BENCHMARKS.md.
bench: build
	bash scripts/setup.sh --bench
	bash bench/run_bench.sh $(BUILD)

# Whole reference models: rkdeploy's executor vs ONNX Runtime 1.30 on the same files.
bench-models: build
	bash scripts/setup.sh --bench
	@[ -f $(BUILD)/models/yolov8n_arch.onnx ] || /usr/bin/python3 scripts/models/make_models.py $(BUILD)/models --quiet
	@[ -d bench/peers/node_modules/onnxruntime-node ] || (cd bench/peers && npm install --ignore-scripts --no-audit --no-fund)
	bash bench/run_models.sh $(BUILD) 15
	/usr/bin/python3 bench/compare_models.py $(BUILD)

# The C/C++ sources against .clang-format (every tracked file; FORMAT_BASE=REV: those changed
# since REV). `make format` rewrites them.
format-check:
	bash scripts/setup.sh --format
	bash scripts/format_check.sh

format:
	bash scripts/setup.sh --format
	bash scripts/format_check.sh --fix

fuzz:
	bash scripts/setup.sh --fuzz
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRKD_ENABLE_FUZZ=ON \
	  -DRKD_ENABLE_TESTS=OFF -DRKD_ENABLE_BENCH=OFF -DRKD_ENABLE_CLI=OFF
	cmake --build build-fuzz -j $(JOBS)
	# New inputs go to build-fuzz/corpus-*; fuzz/corpus holds the committed seeds only.
	mkdir -p build-fuzz/corpus-npy build-fuzz/corpus-onnx build-fuzz/corpus-tfjs build-fuzz/corpus-tflite build-fuzz/corpus-regcmd build-fuzz/corpus-plan build-fuzz/corpus-config build-fuzz/corpus-capture build-fuzz/corpus-prepare build-fuzz/corpus-coco build-fuzz/corpus-artifact
	./build-fuzz/fuzz/fuzz_npy -max_total_time=60 build-fuzz/corpus-npy fuzz/corpus/npy
	./build-fuzz/fuzz/fuzz_onnx -max_total_time=60 -rss_limit_mb=4096 build-fuzz/corpus-onnx fuzz/corpus/onnx
	./build-fuzz/fuzz/fuzz_tfjs -max_total_time=60 -rss_limit_mb=4096 build-fuzz/corpus-tfjs fuzz/corpus/tfjs
	./build-fuzz/fuzz/fuzz_tflite -max_total_time=60 -rss_limit_mb=4096 build-fuzz/corpus-tflite fuzz/corpus/tflite
	./build-fuzz/fuzz/fuzz_regcmd -max_total_time=60 build-fuzz/corpus-regcmd fuzz/corpus/regcmd
	./build-fuzz/fuzz/fuzz_plan -max_total_time=60 build-fuzz/corpus-plan fuzz/corpus/plan
	./build-fuzz/fuzz/fuzz_config -max_total_time=60 build-fuzz/corpus-config fuzz/corpus/config
	./build-fuzz/fuzz/fuzz_capture -max_total_time=60 build-fuzz/corpus-capture fuzz/corpus/capture
	./build-fuzz/fuzz/fuzz_prepare -max_total_time=60 -rss_limit_mb=4096 build-fuzz/corpus-prepare fuzz/corpus/prepare
	./build-fuzz/fuzz/fuzz_coco -max_total_time=60 build-fuzz/corpus-coco fuzz/corpus/coco
	./build-fuzz/fuzz/fuzz_artifact -max_total_time=60 build-fuzz/corpus-artifact fuzz/corpus/artifact
	# The campaign behind docs/fuzzing.md (1 M executions per target): scripts/fuzz_campaign.sh

# Reference models (docs/models.md): DEIMv2-S and YOLOv8n architectures, random weights,
# exported to ONNX with PyTorch goldens; checked against ONNX Runtime.
models: build
	bash scripts/setup.sh --bench
	/usr/bin/python3 scripts/models/make_models.py $(BUILD)/models
	/usr/bin/python3 scripts/models/make_models.py $(BUILD)/models --scale tiny
	/usr/bin/python3 scripts/models/make_models.py $(BUILD)/models --models zoo
	@[ -d bench/peers/node_modules/onnxruntime-node ] || (cd bench/peers && npm install --ignore-scripts --no-audit --no-fund)
	node scripts/models/check_with_ort.js $(BUILD)/models
	/usr/bin/python3 scripts/models/make_qlinear_model.py $(BUILD)/models
	node scripts/models/check_qlinear_with_ort.js $(BUILD)/models $(BUILD)/src/cli/rkdeploy

clean:
	rm -rf build build-san build-aarch64 build-aarch64-sysroot build-fuzz
