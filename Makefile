# Two commands do all set-up on a fresh machine (see README): `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install bench clean

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

bench: $(BIN)/.installed
	bash packaging/start-services.sh
	$(BIN)/python benchmarks/run.py --sizes 100k,1m,3m --reuse

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
