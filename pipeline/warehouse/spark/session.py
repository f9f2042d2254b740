"""The one Spark session of a process: started here in local mode, joined under spark-submit, or a
Spark Connect client (`--spark-remote sc://host:15002`).

Whatever the session, these settings are forced, because figures depend on them:
- `spark.sql.session.timeZone=UTC` and `spark.sql.timestampType=TIMESTAMP_NTZ`: event times are UTC wall
  times (naive = UTC, contract section 1), and so is every naive datetime handed to Spark (PySpark would
  otherwise read it in the Python process's local zone);
- `spark.sql.sources.partitionColumnTypeInference.enabled=false`: a folder `release=4.10` is the string
  "4.10", not the number 4.1;
- `spark.sql.sources.partitionOverwriteMode=dynamic`: overwriting a table replaces only the partitions
  written (pipeline/warehouse/spark/storage.py).

Spark's own logging is turned off (log4j2, from a file written at start): errors reach the user as the
command's one line, never as JVM log lines. Starting a local session takes 10-20 s and the driver about
2 GB (`engine.spark.driver_memory`).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.common.config import SparkSettings
from pipeline.common.errors import UsageError

FORCED = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.timestampType": "TIMESTAMP_NTZ",  # a naive datetime (bound value, GX's bound) is a UTC wall time
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
}
_LOG4J2 = """\
rootLogger.level = off
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %m%n
"""
SPARK_EXTRA = "pip install 'edge-telemetry-pipeline[spark]'"


@dataclass(frozen=True)
class SessionSpec:
    """Where the session comes from; the CLI's --spark-remote / --spark-master win over the config."""

    master: str = "local[*]"
    remote: str = ""
    driver_memory: str = "2g"
    shuffle_partitions: int = 8

    @classmethod
    def of(cls, settings: SparkSettings, master: str | None = None, remote: str | None = None) -> SessionSpec:
        return cls(master or settings.master, remote if remote is not None else settings.remote,
                   settings.driver_memory, settings.shuffle_partitions)

    @property
    def kind(self) -> str:
        if self.remote:
            return "connect"
        return "spark-submit" if under_spark_submit() else "local"


_session: Any = None
_spec: SessionSpec | None = None


def under_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands Python its gateway."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def require_pyspark() -> None:
    """UsageError, saying what to install, when pyspark (or Java for a session started here) is missing."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise UsageError(f"--engine spark needs pyspark: {SPARK_EXTRA}") from None


def require_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if (java_home and Path(java_home, "bin", "java").exists()) or shutil.which("java"):
        return
    raise UsageError("--engine spark starts a local Spark session, which needs Java 17: "
                     "apt-get install openjdk-17-jre-headless (or set JAVA_HOME), "
                     "or join a running Spark Connect server with --spark-remote sc://HOST:15002")


def _quiet() -> None:
    # PySpark 4.x warns once per process that pandas >= 3 is not fully supported; the pipeline hands Spark
    # Arrow data, not pandas frames, and the figures are checked against DuckDB's (tests/test_spark.py).
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas >= 3", category=FutureWarning)
    # PySpark logs every failed query as a JSON line on stderr (Python loggers of pyspark.errors); the error
    # reaches the user as the command's one line instead (EngineError, naming the sql/ file)
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).disabled = True


def _log_config() -> str:
    folder = Path(tempfile.gettempdir()) / f"pipeline-spark-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    path = folder / "log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        path.write_text(_LOG4J2)
    return str(path)


def _start_local(spec: SessionSpec) -> Any:
    """A session of our own: the JVM's stdout and stderr go to a log file (the pipeline's stdout may be a JSON
    object, and its stderr one line per error), with log4j2 turned off."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    conf = (SparkConf().setMaster(spec.master).setAppName("pipeline")
            .set("spark.driver.memory", spec.driver_memory)
            .set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_log_config()}")
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.sql.shuffle.partitions", str(spec.shuffle_partitions)))
    # Python tasks (the ingest's file readers) run in this interpreter, where this package is importable
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in FORCED.items():
        conf = conf.set(key, value)
    if SparkContext._active_spark_context is None:
        with jvm_log().open("ab") as log:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
        SparkContext(conf=conf, gateway=gateway)
    return SparkSession.builder.getOrCreate()


def jvm_log() -> Path:
    """Where the JVM of a local session writes (its own messages; Spark's logging is off)."""
    return Path(_log_config()).with_name("jvm.log")


def get_session(spec: SessionSpec) -> Any:
    """The process's session, started (or joined) on first use; the forced settings applied every time."""
    global _session, _spec
    require_pyspark()
    _quiet()
    if _session is not None and _spec == spec:
        return _session
    try:
        if spec.remote:
            from pyspark.sql import SparkSession

            session = SparkSession.builder.remote(spec.remote).getOrCreate()
        elif under_spark_submit():  # spark-submit's --master and --conf stay as given
            from pyspark.sql import SparkSession

            session = SparkSession.builder.getOrCreate()
        else:
            require_java()
            session = _start_local(spec)
        for key, value in FORCED.items():  # a joined or remote session may have been started without them
            session.conf.set(key, value)
    except UsageError:
        raise
    except Exception as exc:  # the JVM failed to start, or the Connect server is unreachable
        where = f"Spark Connect at {spec.remote}" if spec.remote else f"a Spark session ({spec.master})"
        raise UsageError(f"cannot start {where}: {_first_line(exc)} (JVM messages: {jvm_log()})") from None
    if not spec.remote:
        session.sparkContext.setLogLevel("OFF")
    _session, _spec = session, spec
    return session


def stop() -> None:
    global _session, _spec
    if _session is not None:
        _session.stop()
    _session, _spec = None, None


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")[0].split())
    return text or type(exc).__name__


def spark_problem(exc: BaseException) -> str:
    """A Spark error as one line: its error class and first message line, without the JVM stack."""
    cls = getattr(exc, "getCondition", lambda: None)() or type(exc).__name__
    message = _first_line(exc)
    return message if cls in message else f"{cls}: {message}"
