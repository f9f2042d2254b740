# `make demo` and `make test` create the virtualenv themselves when it is missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
SPARK_STAMP := $(VENV)/.spark-stamp

# pytest-xdist workers, one per core, a test file to a worker (its module fixtures are built once); WORKERS=0: one process
WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest -n $(WORKERS) --dist loadfile
UV_INSTALL := $(BIN)/uv pip install --quiet --python $(BIN)/python

.PHONY: system-packages demo test test-core test-slow test-spark slowest lint bench bench-spark clean

# uv installs the same versions pip would, in a fifth of the time (14 s against 66 s for the test extra, cold
# caches): pip only installs uv
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet 'uv>=0.9'
	$(UV_INSTALL) -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/pipeline nightly --landing sample_logs --db telemetry.duckdb --as-of 2026-12-01 --report-dir reports
	@echo "The examples of README.md and docs/ run as written once the venv is on PATH:"
	@echo "  export PATH=\"$(CURDIR)/$(BIN):\$$PATH\""

# installs the programs the tests drive (tests/system-packages: root on Debian), or stops at once saying how,
# before the venv is built
test: system-packages $(STAMP)
	$(BIN)/ruff check pipeline tests bench
	$(PYTEST)

system-packages:
	tests/system-packages install

# the suite without those programs: their tests are skipped, each listed with its reason
test-core: $(STAMP)
	@tests/system-packages missing | sed 's/^/test-core: not installed, its tests skip: /'
	$(BIN)/ruff check pipeline tests bench
	PIPELINE_TESTS_PARTIAL=1 $(PYTEST)

# the 100-seed sweeps and benchmark-sized runs (pyproject's addopts deselect them from `make test`), Spark
# Connect's among them: the spark extra and Java too
test-slow: $(SPARK_STAMP)
	tests/system-packages install --spark
	$(PYTEST) -m slow --durations=0

# docs/tests.md's table of the slowest default tests, from one run of the default suite as make test runs it
slowest: $(STAMP)
	$(BIN)/python tests/slowest.py

# the Spark engine beside DuckDB (tests/test_spark.py, marker spark): needs Java 17; installs the spark extra
$(SPARK_STAMP): $(STAMP)
	$(UV_INSTALL) -e '.[test,spark]'
	touch $(SPARK_STAMP)

# one Spark session per process: the Spark tests run in one worker
test-spark: $(SPARK_STAMP)
	tests/system-packages install --spark
	$(BIN)/python -m pytest -m 'spark and not slow'

bench-spark: $(SPARK_STAMP)
	$(BIN)/python bench/spark.py

bench: $(STAMP)
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/warehouse.py
	$(BIN)/python bench/bucket_ingest.py

clean:
	rm -rf $(VENV) telemetry.duckdb telemetry.duckdb.wal telemetry.duckdb.lock
