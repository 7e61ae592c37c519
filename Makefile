# Two commands do all set-up on a fresh machine (see README): `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install bench clean package package-check wheel-check

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

# The desktop bundle dist/idemview/ (executable dist/idemview/idemview), built by PyInstaller from
# packaging/idemview.spec; see packaging/README.md.
$(BIN)/pyinstaller: $(BIN)/.installed
	$(BIN)/pip install -q 'pyinstaller>=6.10'

package: $(BIN)/pyinstaller
	$(BIN)/pyinstaller --noconfirm --clean --log-level ERROR --workpath build/pyinstaller --distpath dist \
		packaging/idemview.spec
	@du -sh dist/idemview

# Build the bundle, then run it: --version, demo + scan equal to the source tree, GUI offscreen.
package-check: package
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q -p no:cacheprovider tests/packaging/test_bundle.py

# Build the wheel and install it into a fresh venv (also part of `make test` on CI).
wheel-check: $(BIN)/.installed
	IDEMVIEW_WHEEL_CHECK=1 QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q -p no:cacheprovider \
		tests/packaging/test_wheel.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
