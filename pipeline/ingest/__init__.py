"""Landing -> validation -> the warehouse: finding landed files, reading untrusted Parquet in isolated
workers, casting it to the contract, Great Expectations on every row, the manifest, quarantine and
deduplication (run.py), the Spark ingest, and the data-quality problems of a run. May import common and
warehouse."""
