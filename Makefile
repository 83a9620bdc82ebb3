# Two commands on a fresh machine: `make serve` and `make test`.
#   make test       every test: the image build, exports, soaks and fuzzers included (what CI runs)
#   make test-fast  the fast tier, `pytest -m "not slow"`: a few minutes, for the edit-test loop
#   make lint       ruff (lint and format check), mypy (strict) and the import contracts
#                   ([tool.ruff], [tool.mypy], [tool.importlinter])
#   make test-gpu   the GPU tier (tests/gpu, docs/reliability.md): on a GPU machine with onnxruntime-gpu,
#                   against the exports in GPU_TIER_EXPORTS (default: every /tmp/omni/ex-*, where
#                   benchmarks/gpu/laya.sh and qwen.sh prepare them); installs nothing, and fails
#                   where it cannot run (no CUDA provider, no exports)
#   make lock       regenerate requirements/*.txt from pyproject.toml (after editing its dependencies)
#   make release    the images of this commit, tagged <version>-<commit> (deploy/release.sh); with
#                   REGISTRY=host/path pushed there and their digests printed for the overlays
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8000
# Loopback: the developer command serves this machine only (the image listens on 0.0.0.0).
HOST   ?= 127.0.0.1
# Extras: cpu (onnxruntime) or gpu (onnxruntime-gpu); export and test add torch and references.
# Each installs from its lock, requirements/EXTRA.txt; `make test` takes the default, `make
# serve` cpu,export (the export extra builds the demo model).
EXTRAS ?= cpu,export,test
# torch's build, with export or test: cpu (requirements/torch-cpu.txt: the CPU wheel for Python
# 3.11 on x86_64 Linux, which pip finds where its find-links hold it) or cuda (PyPI's wheel).
TORCH  ?= $(if $(findstring gpu,$(EXTRAS)),cuda,cpu)

comma := ,
LOCKS  = $(patsubst %,requirements/%.txt,$(subst $(comma), ,$(EXTRAS))) \
         $(if $(filter export test,$(subst $(comma), ,$(EXTRAS))),requirements/torch-$(TORCH).txt)
NODEPS = $(if $(filter test,$(subst $(comma), ,$(EXTRAS))),--nodeps requirements/test-nodeps.txt)
# The other runtime goes: onnxruntime and onnxruntime-gpu share one package directory.
DROP   = --drop requirements/$(if $(findstring gpu,$(EXTRAS)),cpu,gpu).txt
# One stamp per set installed: another set (EXTRAS=gpu,export after the default) installs again.
STAMP  = $(VENV)/.installed-$(subst $(comma),+,$(EXTRAS))+torch-$(TORCH)

.PHONY: install serve test test-fast test-gpu lint lock release export-demo clean

install:
	@$(MAKE) --no-print-directory '$(STAMP)' EXTRAS=$(EXTRAS) TORCH=$(TORCH)

# The locks' packages (requirements/sync.py), then the project itself, editable, without
# dependencies: the locks name them all.
$(VENV)/.installed-%: pyproject.toml requirements/pip.txt requirements/sync.py $(LOCKS) \
                      $(if $(NODEPS),requirements/test-nodeps.txt)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r requirements/pip.txt
	$(PY) requirements/sync.py $(DROP) $(NODEPS) $(LOCKS)
	$(PY) -m pip install -q --no-deps -e .
	rm -f $(VENV)/.installed-*
	touch '$@'

serve: EXTRAS = cpu,export
serve: install
	PORT=$(PORT) HOST=$(HOST) $(PY) -m app.launch

test: install
	$(PY) -m pytest -q --durations=20

test-fast: install
	$(PY) -m pytest -q -m "not slow"

# The GPU machine reaches no registry: the tier runs on the Python that has onnxruntime-gpu.
GPU_PY           ?= $(if $(wildcard $(PY)),$(PY),$(PYTHON))
GPU_TIER_EXPORTS ?= $(shell ls -d /tmp/omni/ex-* 2>/dev/null | paste -sd, -)
# One process an export: CUDA sessions of one export are never freed beside another's.
test-gpu:
	@rc=0; for e in $(subst $(comma), ,$(GPU_TIER_EXPORTS)); do \
	  echo "== $$e"; GPU_TIER_EXPORTS=$$e $(GPU_PY) -m pytest -q -p no:cacheprovider -m gpu tests/gpu || rc=1; \
	done; exit $$rc

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo

lock:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes --no-deps -r requirements/uv.txt
	$(PY) requirements/lock.py --uv $(VENV)/bin/uv

# STACKS: gpu cpu (default both), or one of them.
release:
	REGISTRY='$(REGISTRY)' STACKS='$(or $(STACKS),gpu cpu)' deploy/release.sh

clean:
	rm -rf $(VENV) .omni .pytest_cache .ruff_cache .mypy_cache .import_linter_cache
