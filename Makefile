# Two commands on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8000
HOST   ?= 0.0.0.0
# Extras: cpu (onnxruntime) or gpu (onnxruntime-gpu); export and test add torch and references.
EXTRAS ?= cpu,export,test

.PHONY: install serve test export-demo clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch 2.13.0 CPU first: where a local wheel exists pip takes it instead of a CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $@

serve: install
	PORT=$(PORT) HOST=$(HOST) $(PY) -m app.launch

test: install
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) .omni .pytest_cache
