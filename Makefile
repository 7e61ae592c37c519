# Two commands do all set-up on a fresh machine (see README): `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-core test-rest check install bench bench-masking bench-reference bench-gui bench-report clean package package-check wheel-check

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
# The suite's budget is 15 min: each half runs on every core (pytest-xdist; each worker has its own
# databases, tests/conftest.py) and prints its 15 slowest tests. --dist worksteal: each worker starts on
# a contiguous share of the tests (a file's module fixture is mostly built once) and an idle worker takes
# tests from the end of a busy one's (the parameters of the slowest file share the cores; with loadfile
# tests/unit/test_any_input_every_engine.py alone was the half's critical path). TEST_WORKERS=0: one process.
CORE_TESTS := tests/unit tests/presets tests/evidence
TEST_WORKERS ?= auto
PYTEST := QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q --durations=15 -n $(TEST_WORKERS) --dist worksteal

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

# One orchestrated run of every benchmark (issue 27; benchmarks/bench_all.py): each bench writes its results
# as JSON into $$IDEMVIEW_BENCH_CACHE/results/<UTC stamp>/ (default ~/.cache/idemview-bench, outside the
# repository; ledgers are generated once and cached there and in PostgreSQL databases idemview_bench_*),
# every step is timed (wall, CPU, exit code, load) and bounded by its own timeout, a failing step does not
# stop the run, then benchmarks/render_report.py writes BENCHMARKS.md from that folder (the issue-27 targets
# table first, each miss explained from benchmarks/explanations.md). ~35 min on the 2-core machine with the
# ledgers cached (the first run generates them). BENCH_QUICK=1: 10k-20k-row ledgers, a few minutes, to check
# the orchestration. BENCH_SIZES: sizes of the scan step (default 2m). Re-render alone:
# `.venv/bin/python benchmarks/render_report.py [RESULTS_DIR]`.
BENCH_SIZES ?= 2m
BENCH_ARGS ?=
BENCH_QUICK ?=
bench: $(BIN)/.installed
	bash packaging/start-services.sh
	QT_QPA_PLATFORM=offscreen $(BIN)/python benchmarks/bench_all.py $(if $(BENCH_QUICK),--quick,--scan-sizes $(BENCH_SIZES)) $(BENCH_ARGS)

# Masking: precision and recall per kind on the generated corpus (tests/masking_corpus.py), then the
# masker's and the evidence writer's throughput (MASK_ROWS rows, default 100k).
MASK_ROWS ?= 100000
bench-masking: $(BIN)/.installed
	$(BIN)/python benchmarks/bench_masking_corpus.py
	$(BIN)/python benchmarks/bench_masking.py $(MASK_ROWS)

# The incident report (issue 24): 200 operations in full, and a 2M-row demo ledger filtered to ~5,000
# findings (ledgers cached in $$IDEMVIEW_BENCH_CACHE). REPORT_SIZES: demo operations.
REPORT_SIZES ?= 100000,900000
bench-report: $(BIN)/.installed
	$(BIN)/python benchmarks/report_bench.py --operations $(REPORT_SIZES)

# The reference-ledger benchmark of issue 6 (grid latency, attempts export): its own report in build/, since
# BENCHMARKS.md is rendered from `make bench` alone.
bench-reference: $(BIN)/.installed
	bash packaging/start-services.sh
	mkdir -p build
	$(BIN)/python benchmarks/run.py --sizes 100k,1m,3m --reuse --out build/BENCHMARKS-reference.md

# The window on issue 27's ledger (2M Celery rows with the extended columns, SQLite and PostgreSQL, generated
# once and cached), twice per engine: first rows, longest stall, GUI + findings process RSS at one instant.
BENCH_PG ?= postgresql+psycopg://postgres@127.0.0.1:5432
bench-gui: $(BIN)/.installed
	bash packaging/start-services.sh
	cd benchmarks && ../$(BIN)/python -c "import presets_gen as g; [g.ensure(e, 'celery', 2000000, '$(BENCH_PG)/postgres') for e in ('sqlite', 'postgresql')]"
	QT_QPA_PLATFORM=offscreen $(BIN)/python benchmarks/gui_stall.py --issue27 --engines sqlite,postgresql --repeat 2 --timeout 180

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
