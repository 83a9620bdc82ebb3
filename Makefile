# Two commands on a fresh machine: `make serve` and `make test`.
#   make test       every test: the image build, exports, soaks and fuzzers included (what CI runs)
#   make test-fast  the fast tier, `pytest -m "not slow"`: a few minutes, for the edit-test loop
#   make lint       ruff over the repository ([tool.ruff] in pyproject.toml)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8000
# Loopback: the developer command serves this machine only (the image listens on 0.0.0.0).
HOST   ?= 127.0.0.1
# Extras: cpu (onnxruntime) or gpu (onnxruntime-gpu); export and test add torch and references.
EXTRAS ?= cpu,export,test

.PHONY: install serve test test-fast lint export-demo clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch 2.13.0 CPU first: where a local wheel exists pip takes it instead of a CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	# Cloudflare's joint_schema_model.py ships unmodified in clef-finetune: the Clef-Flash parity
	# reference. Without its dependencies: they would bring a torchvision that breaks beside
	# this torch, and the reference needs only torch.
	case ',$(EXTRAS),' in *,test,*) $(PY) -m pip install -q --no-deps clef-finetune==0.1.0 ;; esac
	touch $@

serve: install
	PORT=$(PORT) HOST=$(HOST) $(PY) -m app.launch

test: install
	$(PY) -m pytest -q

test-fast: install
	$(PY) -m pytest -q -m "not slow"

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .omni .pytest_cache .ruff_cache
