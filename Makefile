# `make demo` and `make test` create the virtualenv themselves when it is missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
SPARK_STAMP := $(VENV)/.spark-stamp

.PHONY: demo test test-slow test-spark lint bench bench-spark clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/pipeline nightly --landing sample_logs --db telemetry.duckdb --as-of 2026-12-01 --report-dir reports
	@echo "The examples of README.md and docs/ run as written once the venv is on PATH:"
	@echo "  export PATH=\"$(CURDIR)/$(BIN):\$$PATH\""

test: $(STAMP)
	$(BIN)/ruff check pipeline tests bench
	$(BIN)/python -m pytest

# the 100-seed sweeps and benchmark-sized runs (pyproject's addopts deselect them from `make test`)
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow

# the Spark engine beside DuckDB (tests/test_spark.py, marker spark): needs Java 17; installs the spark extra
$(SPARK_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,spark]'
	touch $(SPARK_STAMP)

test-spark: $(SPARK_STAMP)
	$(BIN)/python -m pytest -m 'spark and not slow'

bench-spark: $(SPARK_STAMP)
	$(BIN)/python bench/spark.py

bench: $(STAMP)
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/warehouse.py
	$(BIN)/python bench/bucket_ingest.py

clean:
	rm -rf $(VENV) telemetry.duckdb telemetry.duckdb.wal telemetry.duckdb.lock
