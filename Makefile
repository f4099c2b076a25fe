# Thin wrappers: CI (.ci/run) calls `make test`, exactly the README's test command.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: help venv lock cluster-binaries node-prerequisites cert-manager csi-driver test test-node test-upstream test-unit test-repeat check lint fmt typecheck imports demo demo-tls demo-down bench bench-quick bench-reload manifests clean image workflows docs docs-reference

help:
	@echo "make test      - virtualenv + control-plane binaries + the whole test suite"
	@echo "make check     - ruff (lint + format), mypy --strict, import-linter, then the tests"
	@echo "make test-unit - unit tests only (no control plane)"
	@echo "make test-node - the real-node tests: kubelet + containerd here, our image from the chart (root)"
	@echo "make test-upstream [UPSTREAM_ARGS=...] - Stakater's own e2e suites: us (our chart) vs the real v1/v2 (root; outside CI; .upstream-e2e/)"
	@echo "make test-repeat [RUNS=5] - the cluster and real-node tiers RUNS times in a row: flakiness, counted (.test-repeat/)"
	@echo "make fmt       - format the code with ruff"
	@echo "make demo      - dev cluster + kube-reloader + a sample app whose ConfigMap change rolls it"
	@echo "make demo-down - stop what make demo started"
	@echo "make demo-tls  - cert-manager renews a real NATS server's certificate; kube-reloader's signal reloads it, no restart, no error (root)"
	@echo "make bench [SCENARIOS=S1,S2] [BASELINE=<git ref>] - kube-reloader vs Stakater Reloader v1.4.21 and v2, 3 runs each (bench/README.md)"
	@echo "make bench-quick - the same, short: S1, S2, S4, S10 (< 15 min)"
	@echo "make bench-reload - reload latency and memory benchmark (bench/README.md)"
	@echo "make manifests - re-render deploy/kubernetes/ from the Helm chart"
	@echo "make docs      - the manual (docs/) with mkdocs --strict; make docs-reference regenerates its reference pages"
	@echo "make image     - kube-reloader's image as an OCI archive in dist/ (root; no container engine needed)"
	@echo "make workflows - actionlint on .github/workflows/"
	@echo "make lock      - re-resolve requirements/*.txt (hashed locks); LOCK_ARGS=--upgrade to move pins"

# Everything comes from the hashed locks in requirements/: first pip and the build backend,
# then the runtime + test + lint packages, then the project itself without resolving anything.
$(STAMP): pyproject.toml requirements/build.txt requirements/dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements/build.txt
	$(PY) -m pip install --quiet --require-hashes -r requirements/dev.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $(STAMP)

venv:
	@scripts/timed venv $(MAKE) --no-print-directory $(STAMP)

cluster-binaries: venv
	@scripts/timed build-control-plane $(BIN)/kube-reloader dev-cluster build

# The suite in tiers (scripts/test_tiers.py): unit tests on 2 workers, then the cluster tests
# on 3 workers against one dev cluster, then the `serial` ones alone. PYTEST_ARGS: one plain
# pytest run with those arguments instead.
test: cluster-binaries
	@scripts/timed tests $(PY) scripts/test_tiers.py $(PYTEST_ARGS)

# The real node (dev-cluster up --real-node) needs root and a few Debian packages; the node's
# programs are built from the Go module proxy on first use (tests/node/conftest.py).
node-prerequisites:
	@scripts/node-prerequisites

cert-manager: venv
	@scripts/timed build-cert-manager $(PY) -c "from kube_reloader.devcluster.certmanager import CertManagerBuilder; CertManagerBuilder(controller=True).ensure()"

csi-driver: venv
	@scripts/timed build-csi-driver $(PY) -c "from kube_reloader.devcluster.csi import CSIBuilder; CSIBuilder().ensure()"

# cert-manager and the CSI driver first: a cold build takes minutes, which no test's timeout
# should pay for
test-node: cluster-binaries node-prerequisites cert-manager csi-driver
	@KUBE_RELOADER_NODE_TESTS=1 scripts/timed node-tests $(BIN)/pytest tests/node $(PYTEST_ARGS)

# Stakater Reloader's own e2e suites (../shared/peers/*/test/e2e, Ginkgo) against kube-reloader
# installed by our chart and against the real peers, on a real-node dev cluster (tests/upstream;
# root; outside CI). UPSTREAM_ARGS: e.g. --targets v2-peer,v2-ours --suites core
test-upstream: cluster-binaries node-prerequisites
	@scripts/timed test-upstream $(PY) -m tests.upstream $(UPSTREAM_ARGS)

# Flakiness measured: the cluster tiers and the real-node tier RUNS times in a row (results and
# a table in .test-repeat/); exit 1 when any test failed in any run.
RUNS ?= 5
test-repeat: cluster-binaries node-prerequisites cert-manager
	@scripts/timed test-repeat $(PY) scripts/repeat_tiers.py --runs $(RUNS)

test-unit: venv
	@scripts/timed unit-tests $(BIN)/pytest tests/unit $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check src tests scripts bench
	$(BIN)/ruff format --check src tests scripts bench

fmt: venv
	$(BIN)/ruff format src tests scripts bench
	$(BIN)/ruff check --fix src tests scripts bench

typecheck: venv
	$(BIN)/mypy

imports: venv
	$(BIN)/lint-imports

check: lint typecheck imports docs test

demo: cluster-binaries
	@$(PY) scripts/demo.py

SCENARIOS ?=
BENCH_ARGS ?=
# BASELINE=<git ref>: also run kube-reloader from that ref's src/, for a before/after table.
BASELINE ?=
BENCH_SELECT = $(if $(SCENARIOS),--scenarios=$(SCENARIOS)) $(if $(BASELINE),--baseline=$(BASELINE))

bench: cluster-binaries
	@$(PY) -m pip install --quiet --require-hashes -r requirements/bench.txt
	@$(PY) -m bench.compare --profile $(BENCH_SELECT) $(BENCH_ARGS)

bench-quick: cluster-binaries
	@$(PY) -m pip install --quiet --require-hashes -r requirements/bench.txt
	@$(PY) -m bench.compare --quick $(BENCH_SELECT)

bench-reload: cluster-binaries
	@$(PY) -m bench.reload_bench

manifests: cluster-binaries
	@$(PY) scripts/render_manifests.py

# The locks are resolved by uv (pinned here) in a throwaway virtualenv, never a project
# dependency: --universal gives one lock for every platform and Python >= 3.11, and the
# existing pins are kept unless LOCK_ARGS=--upgrade (or --upgrade-package NAME) says otherwise.
# tests/unit/test_lockfiles.py fails when pyproject.toml and the locks disagree.
UV_VERSION := 0.13.9
LOCKGEN := $(or $(TMPDIR),/tmp)/kube-reloader-lockgen
LOCK_ARGS ?=
COMPILE = $(LOCKGEN)/bin/uv pip compile --quiet --universal --python-version 3.11 --generate-hashes \
	--custom-compile-command "make lock  (uv $(UV_VERSION) in a throwaway venv; see the Makefile)" $(LOCK_ARGS)

lock:
	rm -rf $(LOCKGEN)
	$(PYTHON) -m venv $(LOCKGEN)
	$(LOCKGEN)/bin/pip install --quiet uv==$(UV_VERSION)
	$(COMPILE) requirements/build.in -o requirements/build.txt
	$(COMPILE) pyproject.toml -o requirements/runtime.txt
	$(COMPILE) pyproject.toml --extra test --extra lint --extra docs \
		-c requirements/runtime.txt -c requirements/build.txt -o requirements/dev.txt
	$(COMPILE) pyproject.toml --extra test --extra lint --extra docs --extra bench \
		-c requirements/dev.txt -o requirements/bench.txt
	rm -rf $(LOCKGEN)

# the real node (root), cert-manager and nats-server built on first use; RENEWALS=3 by default
demo-tls: cluster-binaries node-prerequisites cert-manager
	@$(PY) scripts/demo_tls.py

demo-down: venv
	@$(PY) scripts/demo_down.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# kube-reloader's image, as the real-node tests build it (devcluster/ownimage.py: Debian
# bookworm's python3 and the hashed locks, no container engine; needs root for debootstrap and
# chroot), written to dist/kube-reloader-<version>.oci.tar as localhost/kube-reloader:<version>;
# prints how to push it (skopeo, crane or podman).
image: venv
	@$(PY) scripts/build_image.py

# actionlint on .github/workflows/ (built from the Go module proxy on first use, cached).
workflows: venv
	@$(PY) scripts/check_workflows.py


# The manual (docs/, mkdocs.yml), built with --strict: a broken link or anchor, or a page left
# out of the nav, fails. The site goes under the virtualenv, never into the repository.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $(VENV)/site

# docs/flags.md, docs/annotation-keys.md and docs/metrics.md, regenerated from the code
# (tests/unit/test_docs.py fails when they differ).
docs-reference: venv
	$(PY) -m kube_reloader.cli.reference docs
