# Thin wrapper over CMake: the two Quick start commands and a few helpers.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all deps configure build test demo bench clean tiny-gpt ranks notebooks device-bundle

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	@$(BUILD)/fp8lab run experiments/quickstart.ini --force

# A tiny GPT trained on the CPU, captured with tools/capture/fp8lab_capture.py, then replayed.
# Needs torch: python_with_torch.sh prefers /usr/bin/python3 (Debian's python3-torch, installed
# when no interpreter has torch), since python3 on PATH may be another Python without it.
tiny-gpt: build
	@PY=$$(sh tools/capture/python_with_torch.sh --install) && \
	  $$PY experiments/tiny_gpt.py --out out/tiny_gpt/trace && \
	  $(BUILD)/fp8lab run experiments/tiny_gpt.ini --force

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

clean:
	rm -rf $(BUILD)
