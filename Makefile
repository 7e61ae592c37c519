# Two commands do all set-up on a fresh machine (see README): `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install bench bench-reference clean

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(BIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/idemview --demo

test: $(BIN)/.installed
	bash packaging/start-services.sh
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q

# Per-preset floors, whole-process scans, export (issue 11); BENCH_SIZES=100k,1m picks sizes. Ledgers are
# cached in $$IDEMVIEW_BENCH_CACHE (default ~/.cache/idemview-bench), outside the repository.
BENCH_SIZES ?= 100k,1m,2m
BENCH_ARGS ?=
bench: $(BIN)/.installed
	bash packaging/start-services.sh
	$(BIN)/python benchmarks/presets_bench.py --sizes $(BENCH_SIZES) $(BENCH_ARGS)

# The reference-ledger benchmark of issue 6 (grid latency, attempts export; writes BENCHMARKS.md too).
bench-reference: $(BIN)/.installed
	bash packaging/start-services.sh
	$(BIN)/python benchmarks/run.py --sizes 100k,1m,3m --reuse

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
