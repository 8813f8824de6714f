# Thin wrapper over CMake: the two Quick start commands and a few helpers.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all deps configure build test demo moe bench clean tiny-gpt closed-loop ranks notebooks device-bundle \
        fuzz-build fuzz install wheel

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Installs fp8lab into PREFIX (default /usr/local): bin/fp8lab, lib/fp8lab/fp8lab-gpu.so when
# CUDA was found, the docs and the shipped experiments in share/ (CMakeLists.txt, issue 43).
PREFIX ?= /usr/local
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# The Python package as a wheel in dist/ (pyproject.toml: pip builds the program with this
# CMake through scikit-build-core and ships it inside the package with the capture tool, the
# converters and fp8lab.load); `pip install dist/fp8lab-*.whl`, or `pip install .` directly.
wheel: deps
	@python3 -m pip wheel --no-deps --disable-pip-version-check -w dist .

# The demo builds the command-line tool alone (the tests, benchmarks and the CUDA emulator's
# module are `make test`'s): about a quarter of the whole build.
demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target fp8lab
	@$(BUILD)/fp8lab run experiments/quickstart.ini --force

# The Mixture-of-Experts demo: the synthetic "moe" trace (fp8lab synth moe) through
# experiments/moe.ini into out/moe/ (report.md's Mixture-of-Experts section).
moe: configure
	@cmake --build $(BUILD) -j $(JOBS) --target fp8lab
	@$(BUILD)/fp8lab run experiments/moe.ini --force

# A tiny GPT trained on the CPU, captured with fp8lab.capture (python/fp8lab), then replayed.
# Needs torch: python_with_torch.sh prefers /usr/bin/python3 (Debian's python3-torch, installed
# when no interpreter has torch), since python3 on PATH may be another Python without it.
tiny-gpt: build
	@PY=$$(sh tools/capture/python_with_torch.sh --install) && \
	  $$PY experiments/tiny_gpt.py --out out/tiny_gpt/trace && \
	  $(BUILD)/fp8lab run experiments/tiny_gpt.ini --force

# The closed-loop study (issue 44; tools/closedloop/README.md): the tiny GPT trained in high
# precision (seeds 1, 2, 3; a forced loss spike at steps 150-153), fp8lab's advice for it, then
# the same training under the advice, TE's default and a bad recipe with fp8lab's emulator
# (fp8lab.closedloop), each replayed, into out/closedloop/; `fp8lab closedloop` writes its
# report (out/closedloop/report/closedloop.md). CLOSED_LOOP_STEPS=300: 257 s on the 2-core
# build machine, warm build, lightly loaded (15 minutes is the budget; tools/closedloop/README.md
# has the measurement, and what heavy load from other jobs does to it).
CLOSED_LOOP_STEPS ?= 300
closed-loop: configure
	@cmake --build $(BUILD) -j $(JOBS) --target fp8lab fp8lab_emu
	@PY=$$(sh tools/capture/python_with_torch.sh --install) && \
	  OMP_NUM_THREADS=1 FP8LAB_BUILD=$(BUILD) $$PY tools/closedloop/study.py \
	    --out out/closedloop --steps $(CLOSED_LOOP_STEPS) --fp8lab $(BUILD)/fp8lab --force

# A four-rank run folder (fp8lab synth per rank), replayed with the amax reduction of
# experiments/ranks.ini (reduce_amax over groups of two ranks).
RANKS_STEPS ?= 60
ranks: build
	@rm -rf out/ranks_trace && for r in 0 1 2 3; do \
	  $(BUILD)/fp8lab synth llm out/ranks_trace/rank_$$r --steps $(RANKS_STEPS) --seed $$((r + 1)) >/dev/null || exit 1; \
	done && $(BUILD)/fp8lab run experiments/ranks.ini --force

# Re-runs the shipped experiments and rebuilds their copies in notebooks_export/ from scratch
# (scripts/notebook_export.py): <e>.ipynb, <e>/report.md, <e>/plots/ (only the PNGs report.md
# references) and <e>/data/ (the reduced data the notebook runs on: aggregates, thinned stream).
NOTEBOOK_EXPERIMENTS ?= quickstart recipes
notebooks: build
	@for e in $(NOTEBOOK_EXPERIMENTS); do \
	  $(BUILD)/fp8lab run experiments/$$e.ini --force --quiet --out out/$$e || exit 1; \
	  python3 scripts/notebook_export.py out/$$e notebooks_export || exit 1; \
	done

bench: build
	@$(BUILD)/bench_quant

# The full fp8lab with the GPU engine, for the GPU machine's parity check: builds build-bundle/
# and writes .device-bundle/ (carry it: see scripts/device-check.sh). Needs deps and CUDA here.
device-bundle: deps
	@JOBS=$(JOBS) bash scripts/device-bundle.sh

# Fuzzing (docs/fuzzing.md): the libFuzzer targets of tests/fuzz in a clang build of their own
# (ASan + UBSan), each run FUZZ_TIME seconds; the inputs they find are kept in
# $(FUZZ_BUILD)/fuzz-work/corpus/<target> for the next run, a finding's input goes to
# $(FUZZ_BUILD)/fuzz-work/fuzz-artifacts/<target>/. FUZZ_ARGS go to libFuzzer (e.g. -runs=1000000).
# CI runs the short version: `ctest -L fuzz` in that build (.ci/run).
FUZZ_BUILD ?= build-fuzz
FUZZ_TIME ?= 600
FUZZ_TARGETS ?= safetensors npy amax_csv experiment steps_csv stream_csv stream_npy histograms_csv \
  gemm_csv run_json te_log tokens_csv experts_csv
FUZZ_ARGS ?=
fuzz-build: deps
	@bash scripts/install-fuzz-deps.sh
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DFP8LAB_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets

fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  bash tests/fuzz/run_fuzz.sh $(FUZZ_BUILD)/tests/fuzz/fuzz_$$t tests/fuzz/corpus/$$t \
	    tests/fuzz/$$t.dict $(FUZZ_TIME) $(FUZZ_BUILD)/fuzz-work -- $(FUZZ_ARGS) || exit 1; \
	done

clean:
	rm -rf $(BUILD)
