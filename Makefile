# The two commands a newcomer needs: `make demo` and `make test`. Everything else is `azdl --help`.
.PHONY: demo test test-fast docs bench dist setup setup-operator setup-training setup-azurite lint

# The set-ups run side by side (make -j): the operator's install and Azurite's are mostly one
# core of unpacking and byte-compiling, beside the training one's downloads; its Horovod build
# comes last. A cold `make setup` (fresh clone, 2 cores, 2026-11-26): 906 s in turn, 780 s side by side.
demo:  ## local 2-worker Horovod training on synthetic data
	$(MAKE) --no-print-directory -j2 setup-operator setup-training
	.venv/bin/azdl train --workers 2

test: setup  ## every test: unit, Pulumi-under-mocks, multi-process Horovod and torchrun, Azurite
	scripts/setup-browser.sh
	scripts/test.sh

test-fast: setup-operator  ## the operator side's tests in under 2 minutes, saying what it leaves out
	@echo "==> make test-fast leaves out tests/training and every test marked training_env (they need"
	@echo "    the training environment) and those marked slow (stack renders, the docs build, Azurite,"
	@echo "    multi-process training); make test runs them all"
	.venv/bin/python -m pytest tests --ignore=tests/training -m "not slow and not training_env"

docs: setup-operator  ## the docs site, strictly (broken links and missing pages fail): out/site/
	scripts/build-docs.sh

bench: setup  ## re-run every benchmark, rewriting benchmarks/results/ (QUICK=1: minutes, not an hour)
	scripts/bench-all.sh

dist: setup-operator  ## the wheel a team pins (version from git tags): dist/azdl-<version>-py3-none-any.whl
	rm -rf dist build
	.venv/bin/python -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist .
	@ls dist/*.whl

setup:
	$(MAKE) --no-print-directory -j3 setup-operator setup-training setup-azurite

setup-operator:
	scripts/setup-operator.sh

setup-training:
	scripts/setup-training.sh

setup-azurite:
	scripts/setup-azurite.sh

lint: setup-operator
	.venv/bin/ruff check . && .venv/bin/ruff format --check .
