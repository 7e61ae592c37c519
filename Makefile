# Two commands do all set-up on a fresh machine (see README): `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-core test-rest check install bench clean

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(BIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/idemview --demo

# The core test folders run with PySide6/pyqtgraph made unimportable (.ci/noqt/sitecustomize.py): the
# core must work without Qt (DESIGN §10). Everything else runs with Qt, offscreen. Each test runs once.
CORE_TESTS := tests/unit tests/presets tests/evidence
PYTEST := QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q

test: $(BIN)/.installed
	bash packaging/start-services.sh
	$(MAKE) --no-print-directory -k test-core test-rest  # -k: both halves run even if one fails

test-core: $(BIN)/.installed
	PYTHONPATH=.ci/noqt $(PYTEST) -p no:pytest-qt -W ignore::pytest.PytestConfigWarning $(CORE_TESTS)

test-rest: $(BIN)/.installed
	$(PYTEST) tests $(addprefix --ignore=,$(CORE_TESTS))

# Lint, format, types (core only: idemview/ minus idemview/qt) and the import contracts (pyproject.toml).
check: $(BIN)/.installed
	$(BIN)/ruff check idemview tests
	$(BIN)/ruff format --check idemview tests
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(BIN)/.installed
	bash packaging/start-services.sh
	$(BIN)/python benchmarks/run.py --sizes 100k,1m,3m --reuse

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
