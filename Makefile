# DeepSearch Lab.  `make demo` runs the Simpsons demo, `make test` the tests;
# both set everything up first (see scripts/setup.sh).
PY := .venv/bin/python
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo test test-quick lab notebooks render render-full bench clean

setup:
	@scripts/setup.sh

demo: setup
	$(PY) -m helpers demo

test: setup
	$(PY) -m pytest -q

# the edit-run loop: no model calls, no notebook execution (the full suite is `make test`)
test-quick: setup
	$(PY) -m pytest -q -m "not slow"

lab: setup
	@if [ -n "$$DSL_FAST" ] && [ "$$DSL_FAST" != 0 ]; then \
	  echo "lab: FAST mode (DSL_FAST=$$DSL_FAST): the 0.5B model, small budgets, few questions"; \
	else \
	  echo "lab: FULL mode: the 1.5B model and full budgets (some notebooks run for many minutes);"; \
	  echo "     for quick runs start it as: DSL_FAST=1 make lab, or set MODE = \"fast\" at the top of a notebook"; \
	fi
	$(PY) -m jupyter lab notebooks $(if $(filter 0,$(shell id -u)),--allow-root,)

notebooks: setup
	$(PY) -m helpers notebooks --out outputs/notebooks

# the series executed and rendered as HTML into notebooks/rendered/fast (and, slowly, .../full)
render: setup
	$(PY) -m helpers notebooks --render --fast

render-full: setup
	$(PY) -m helpers notebooks --render

bench: setup
	$(PY) bench/run_all.py

clean:
	rm -rf outputs data/milvus .pytest_cache
