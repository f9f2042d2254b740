"""gates/admission.yaml, loaded once into frozen, typed objects.

The dataclasses below are the registry of settings: their fields are the only
keys allowed, their types and `meta` bounds are checked on load, and every
error names the file and the dotted key (`gates.peak_memory.max_p95_ratio`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.common import package_data
from pipeline.common.errors import ConfigError
from pipeline.common.registry import CLOUD_CHECK_CATCHES, ESTIMANDS, GATE_NAMES
from pipeline.common.vocabulary import DEVICE_DIMENSIONS, EDGE_ERRORS, ROUTES, EdgeError, Route
from pipeline.common.yamlspec import build, read_yaml, setting

DEFAULT_CONFIG = package_data.folder("gates") / "admission.yaml"
CONFIG_ENV = "PIPELINE_CONFIG"  # a config path for every command, beside PIPELINE_DB
# enforce: a failure rolls the segment back; hold: it holds the segment (no move toward the edge) and alerts,
# without rolling back; observe: it is only reported
MODES = ("enforce", "observe", "hold")
WINDOW_KINDS = ("allow", "deny")
BURDENS = ("prove_harm", "prove_safe")  # docs/how-the-gate-decides.md: who must bring the evidence
NETWORK_TYPES = ("wifi", "5g", "4g", "3g", "2g", "offline", "unknown")  # the contract's network_type values


def _f(default: Any, lo: float | None = None, hi: float | None = None, choices: tuple | None = None,
       help: str = "", **checks: Any) -> Any:
    return setting(default, lo=lo, hi=hi, choices=choices, help=help, **checks)


@dataclass(frozen=True)
class Gate:
    mode: str = _f("enforce", choices=MODES, help="enforce: a failure rolls back; hold: it holds the segment's "
                                                  "state and alerts, without rolling back; observe: only reported")
    burden: str = _f("prove_harm", choices=BURDENS, help="prove_harm: fail only when the evidence shows the "
                     "threshold is broken; prove_safe: keep only when the evidence shows it holds")


@dataclass(frozen=True)
class RatioCeiling(Gate):
    max_p95_ratio: float = _f(0.40, 0, 1, help="p95 of memory / device RAM")


@dataclass(frozen=True)
class KillRate(Gate):
    max_share: float = _f(0.01, 0, 1, help="share of edge device-days with at least one kill (Android vitals: a "
                          "user-perceived low-memory-kill rate above 1 % is bad behaviour)")
    max_share_per_model: float = _f(0.08, 0, 1, help="pipeline drill by soc: a chip whose devices are killed on more "
                                    "of their device-days is named (Play's per-phone-model bad-behaviour line, 8 %)")
    kill_codes: tuple[str, ...] = _f((EdgeError.OOM.value, EdgeError.LMK_KILLED.value), choices=EDGE_ERRORS,
                                     min_items=1, help="error_code values that count as a kill (the others are "
                                                       "reported beside it)")


@dataclass(frozen=True)
class MsCeiling(Gate):
    max_p95_ms: float = _f(10_000.0, 0, 3_600_000, help="p95 in milliseconds")


@dataclass(frozen=True)
class QualityLoss(Gate):
    max_relative_loss: float = _f(0.03, 0, 1, help="(cloud - edge) / cloud adoption")


@dataclass(frozen=True)
class Retention(Gate):
    mode: str = _f("observe", choices=MODES)
    max_drop: float = _f(0.01, 0, 1, help="the edge arm's share of returning devices may be at most this far "
                         "below the cloud hold-back's (absolute)")
    horizon_days: float = _f(7.0, 1, 60, help="a device returns when it has a request at least this many days "
                             "after its first in the window")


@dataclass(frozen=True)
class Detectability(Gate):
    min_share: float = _f(0.90, 0, 1, help="failures caught automatically / all failures")


@dataclass(frozen=True)
class FallbackRate(Gate):
    max_rate: float = _f(0.25, 0, 1, help="ceiling on the edge fallback rate")
    max_excess_over_cloud: float = _f(0.05, 0, 1, help="edge rate may exceed cloud's by at most this")


@dataclass(frozen=True)
class Thermal(Gate):
    max_p95_rise_c: float = _f(5.0, 0, 110, help="p95 of temp_end_c - temp_start_c")
    max_throttled_share: float = _f(0.10, 0, 1, help="share of edge requests with OS throttling")


@dataclass(frozen=True)
class DailyEdgeSeconds(Gate):
    mode: str = _f("observe", choices=MODES)
    max_share_over_cap: float = _f(0.05, 0, 1, help="share of device-days over network.daily_edge_seconds_cap")


@dataclass(frozen=True)
class Gates:
    # memory kills the app (OOM, low-memory killer) and is nearly deterministic per build and RAM class,
    # so proving it safe costs few rows: the edge must show it fits
    peak_memory: RatioCeiling = RatioCeiling(burden="prove_safe")
    resident_memory: RatioCeiling = RatioCeiling(max_p95_ratio=0.25, burden="prove_safe")
    kill_rate: KillRate = KillRate()
    inference_duration: MsCeiling = MsCeiling()
    cold_start: MsCeiling = MsCeiling(max_p95_ms=500.0)
    quality_loss: QualityLoss = QualityLoss()
    retention: Retention = Retention()
    failure_detectability: Detectability = Detectability()
    fallback_rate: FallbackRate = FallbackRate()
    weak_network_latency: Gate = Gate()
    thermal: Thermal = Thermal()
    daily_edge_seconds: DailyEdgeSeconds = DailyEdgeSeconds()

    def names(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self)]


@dataclass(frozen=True)
class Network:
    weak_rtt_ms: float = _f(300.0, 0, 600_000, help="rtt_ms at or above this is a weak network")
    weak_network_types: tuple[str, ...] = _f(("2g", "3g"), choices=NETWORK_TYPES,
                                             help="network_type values that are weak")
    daily_edge_seconds_cap: float = _f(600.0, 0, 86_400, help="edge inference seconds per device-day")


@dataclass(frozen=True)
class Statistics:
    confidence: float = _f(0.95, 0.5, 0.9999, help="level of intervals; alpha = 1 - confidence is the error "
                           "budget of one release evaluation (and, sequential, of the whole rollout)")
    method: str = _f("sequential", choices=("sequential", "fixed"),
                     help="sequential: anytime-valid tests, for a gate judged every night; fixed: one look only")
    estimand: str = _f("per_device", choices=ESTIMANDS,
                       help="how rate and comparison gates weigh devices: per_device (every device once: the mean "
                            "of per-device rates, a loss of users), capped_requests (a device's rows count up to "
                            "weight_cap_rows), requests (every row once: a loss of requests)")
    weight_cap_rows: float = _f(20.0, 1, 1_000_000, help="capped_requests: rows a device counts for at most")
    primary_share: float = _f(0.8, 0.01, 1, help="share of a gate's alpha its release-wide check is tested at "
                              "first; its segment checks get the rest, and all of it once the release-wide check "
                              "rejects (graphical gatekeeping, docs/how-the-gate-decides.md)")

    def weight_cap(self) -> float:
        """The SQL's $weight_cap: the most rows one device counts for under the estimand."""
        return {"per_device": 1.0, "capped_requests": self.weight_cap_rows, "requests": 1e18}[self.estimand]


ASSIGNMENT_UNITS = ("request", "device")
SRM_ACTIONS = ("hold", "rollback", "warn")


@dataclass(frozen=True)
class Assignment:
    """The split the rollout declares between the edge and the cloud hold-back, which the sample-ratio-mismatch
    check (pipeline/gate/assignment.py) holds the data to before any comparison with the cloud is believed."""
    unit: str = _f("request", choices=ASSIGNMENT_UNITS, help="what is assigned to an arm: request (each online "
                   "request on its own, the contract's hold-back rows) or device (a device stays on its arm)")
    holdback_share: float | None = _f(None, 0, 1, help="the cloud hold-back's declared share of online requests "
                                      "(unit request) or of devices (unit device); `pipeline gate --holdback-share` "
                                      "overrides it. Not set: the split is not declared, and the check tests only what "
                                      "holds without a declaration (every task x tier holds back the release's share)")
    max_p_value: float = _f(0.001, 1e-12, 0.5, help="flag a mismatch at an anytime-valid p-value at or below this "
                            "(release-wide; the task x tier scopes share it, Bonferroni)")
    min_deviation: float = _f(0.001, 0, 1, help="a found hold-back share closer than this to the declared one is "
                              "never flagged, however large the sample")
    max_leaked_share: float = _f(0.001, 0, 1, help="unit device: devices seen on both arms above this share of "
                                 "devices are a leak")
    action: str = _f("hold", choices=SRM_ACTIONS, help="when the split is off, the comparison checks of its scope: "
                     "hold (not a pass: insufficient_data), rollback (fail) or warn (a note only)")


SINK_KINDS = ("stdout", "jsonl", "webhook", "slack", "alertmanager", "pagerduty")
# what each kind of sink needs besides its kind (pipeline/delivery/sinks.py sends to them)
SINK_NEEDS = {"jsonl": ("path",), "webhook": ("url",), "slack": ("url",), "alertmanager": ("url",),
              "pagerduty": ("routing_key_env",)}
PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"


@dataclass(frozen=True)
class Sink:
    """One receiver of the alerts (docs/nightly.md "Alert sinks")."""
    kind: str = setting(choices=SINK_KINDS, help="stdout, jsonl, webhook, slack, alertmanager or pagerduty")
    name: str = _f("", help="its name in outputs and `pipeline alerts test --sink NAME` (default: its kind)")
    url: str = _f("", url=True, help="webhook and slack: the incoming webhook; alertmanager: its base URL "
                                     f"(POST /api/v2/alerts); pagerduty: default {PAGERDUTY_EVENTS_URL}")
    path: str = _f("", help="jsonl: the file each alert is appended to")
    routing_key_env: str = _f("", help="pagerduty: the environment variable holding the routing key (never the "
                                       "key itself in this file)")
    report_base_url: str = _f("", url=True, help="where `nightly --report-dir` is published: alerts link "
                                                 "report-<release>.html under it")
    ends_after_hours: float = _f(26.0, 0.1, 24 * 30, help="alertmanager: an ongoing alert's endsAt is this far "
                                                         "ahead, past the next nightly run; re-posted every run")

    @property
    def label(self) -> str:
        return self.name or self.kind


@dataclass(frozen=True)
class Alerts:
    repeat_interval_hours: float = _f(24.0, 0, 24 * 365, help="the same verdict is not re-sent sooner")
    sinks: tuple[Sink, ...] = _f((), help="the receivers, one entry each (kind and settings); when given, the "
                                         "three keys below are not read")
    stdout: bool = _f(True, help="print each alert (without `sinks`)")
    jsonl_path: str = _f("", help="append each alert as a JSON line to this file ('' = off; without `sinks`)")
    webhook_url: str = _f("", url=True, help="POST each alert as JSON with a `text` field ('' = off; without "
                                             "`sinks`)")
    webhook_timeout_s: float = _f(5.0, 0.1, 300)
    webhook_retries: int = _f(3, 0, 20, help="retries of a temporary failure within one delivery run")
    webhook_backoff_s: float = _f(0.5, 0, 60, help="first retry delay; doubles, capped at 30 s")
    delivery_deadline_s: float = _f(60.0, 0, 3600, help="total time one delivery run spends on the webhook, "
                                                        "Retry-After waits included; the rest waits for the next run")
    max_quarantined_share: float = _f(0.05, 0, 1, help="nightly: a data_quality alert above this share of "
                                      "rows read quarantined in one run")
    max_days_without_data: float = _f(2.0, 0, 3650, help="nightly: a data_quality alert when no new file has "
                                      "loaded for longer than this many days")


@dataclass(frozen=True)
class Metrics:
    textfile: str = _f("", help="every nightly run writes `pipeline metrics` here, for node_exporter's textfile "
                                "collector (a .prom file in its --collector.textfile.directory; '' = off)")


@dataclass(frozen=True)
class Routing:
    cloud_check_catches: tuple[str, ...] = _f(CLOUD_CHECK_CATCHES, choices=GATE_NAMES,
                                              help="gates whose failures a cloud check of the edge draft catches")
    insufficient_data_route: str = _f(Route.EDGE_WITH_CLOUD_CHECK.value, choices=ROUTES)
    previous_edge: bool = _f(False, help="the app keeps the previous release's edge model on the phone: a segment "
                                         "that fails where that model passed routes to it, not to the cloud")
    dimensions: tuple[str, ...] = _f((), choices=DEVICE_DIMENSIONS,
                                     help="device dimensions the gate also judges and routes by inside each "
                                          "segment (docs/drill-down.md)")


@dataclass(frozen=True)
class RolloutWindow:
    """A recurring stretch of time in which moves toward the edge wait (deny) or may happen (allow);
    rollbacks never wait (docs/rollout.md "Windows")."""
    name: str = setting(blank=False, help="named in outputs, e.g. holiday-freeze")
    kind: str = setting(choices=WINDOW_KINDS, help="deny: recovery and promotion wait inside it; allow: when any "
                                                   "allow window is listed, they happen only inside one")
    start: str = setting(blank=False, help="the first occurrence's start, a local ISO time in `timezone`, "
                                           "e.g. 2026-12-19T00:00")
    duration_hours: float = _f(24.0, above=0, hi=24 * 366, help="how long each occurrence lasts")
    rrule: str = _f("", help="RFC 5545 recurrence rule, e.g. FREQ=WEEKLY;BYDAY=SA,SU ('' = once)")
    timezone: str = _f("UTC", help="IANA time zone of `start` and the rule, e.g. Europe/Berlin")

    def rule(self) -> Any:
        """The occurrences' starts as a dateutil rrule(set) of aware local times; ValueError names the key."""
        from datetime import datetime
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        from dateutil.rrule import rrulestr

        try:
            zone = ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"timezone: {self.timezone!r} is not an IANA time zone (e.g. Europe/Berlin)") from None
        try:
            first = datetime.fromisoformat(self.start)
        except ValueError:
            raise ValueError(f"start: {self.start!r} is not an ISO time (e.g. 2026-12-19T00:00)") from None
        if first.tzinfo is not None:
            raise ValueError(f"start: {self.start!r}: give a local time without an offset; `timezone` places it")
        first = first.replace(tzinfo=zone)
        rule = self.rrule.removeprefix("RRULE:") or "FREQ=DAILY;COUNT=1"
        try:
            return rrulestr(rule, dtstart=first, forceset=True)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"rrule: {self.rrule!r} is not an RFC 5545 recurrence rule: {exc}") from None


@dataclass(frozen=True)
class Rollout:
    """Rollout state per segment across evaluations (pipeline/rollout/state.py). A look is one as-of day."""
    fail_looks: int = _f(1, 1, 30, help="failing looks among the last `window_looks` that roll a segment back")
    window_looks: int = _f(1, 1, 30, help="decisive (pass or fail) looks counted for fail_looks")
    min_dwell_days: int = _f(2, 0, 365, help="a rollback lasts at least this many days after its last failing look")
    recover_looks: int = _f(3, 1, 60, help="consecutive passing looks in recovering before ok again")
    windows: tuple[RolloutWindow, ...] = _f((), help="deny (freeze) and allow windows for recovery and promotion; "
                                              "rollbacks never wait (docs/rollout.md)")


@dataclass(frozen=True)
class CloudCost:
    per_request: float | None = _f(None, 0, 1e6, help="cloud cost of one request")
    per_1k_tokens: float | None = _f(None, 0, 1e6, help="cloud cost per 1,000 prompt + output tokens")
    check_per_request: float | None = _f(None, 0, 1e6, help="cost of one cloud check of an edge draft")


@dataclass(frozen=True)
class UpdateCost:
    package_mb: float | None = _f(None, 0, 1e7, help="size of the model update package, MB")
    installs: float | None = _f(None, 0, 1e12, help="devices that download the release")
    per_gb: float | None = _f(None, 0, 1e6, help="delivery cost per GB (1 GB = 1000 MB)")


@dataclass(frozen=True)
class EngineeringCost:
    hours_per_release: float | None = _f(None, 0, 1e7, help="engineering hours spent on the release's edge model")
    hourly_rate: float | None = _f(None, 0, 1e6, help="cost of one engineering hour")


@dataclass(frozen=True)
class TierPower:
    low: float | None = _f(None, 0, 1000, help="device power while inferring, W")
    mid: float | None = _f(None, 0, 1000)
    high: float | None = _f(None, 0, 1000)
    flagship: float | None = _f(None, 0, 1000)


@dataclass(frozen=True)
class Costs:
    """Unit costs of `pipeline ledger`; every one optional: a term whose inputs are missing is not computed."""
    currency: str = _f("", help="label printed after amounts, e.g. USD")
    cloud: dict[str, CloudCost] = _f(None, help="per task (or `default`): cloud request costs")
    update: UpdateCost = UpdateCost()
    engineering: EngineeringCost = EngineeringCost()
    power_w: TierPower = TierPower()
    estimate_flag_factor: float = _f(1.25, 1, 1000, help="flag a field figure worse than the estimate by this factor")
    lost_user_value: float | None = _f(None, 0, 1e9, help="what one user who stops coming back costs (the post-"
                                       "mortem's last term: uninstalls and lost retention); prices the retention "
                                       "drop of the edge arm")


ENGINES = ("duckdb", "spark")


@dataclass(frozen=True)
class SparkSettings:
    """Where a Spark session comes from (pipeline/warehouse/spark/session.py); the CLI's --spark-* options win."""
    master: str = _f("local[*]", help="master URL of a session started here (local[*], yarn, spark://...)")
    remote: str = _f("", help="Spark Connect URL (sc://host:15002); '' = start or join a classic session")
    warehouse: str = _f("", help="root of the partitioned Parquet tables (events, quarantine, rollups); "
                                 "'' = <db>.spark/ beside the DuckDB file")
    driver_memory: str = _f("2g", help="spark.driver.memory of a session started here")
    shuffle_partitions: int = _f(8, 1, 100_000, help="spark.sql.shuffle.partitions of a session started here")


@dataclass(frozen=True)
class EngineSettings:
    """Which engine stores events and runs the rollup and the gate's SQL (docs/spark.md)."""
    name: str = _f("duckdb", choices=ENGINES, help="duckdb (one file) or spark (partitioned Parquet)")
    sketch_relative_error: float = _f(0.005, 0.0001, 0.05, help="relative error bound of the rollup's log-bucket "
                                                                 "histograms, which the window p95s shown are read "
                                                                 "from (the bucket width)")
    spark: SparkSettings = SparkSettings()


@dataclass(frozen=True)
class LandingSettings:
    """Where a bucket landing's store is (pipeline/ingest/object_store.py, docs/landing.md). Credentials never go
    here: each platform's SDK finds them (the AWS chain, Application Default Credentials, an Azure connection
    string or DefaultAzureCredential)."""
    endpoint_url: str = _f("", help="the store's address where it is not the platform's own: an S3-compatible "
                                    "store (https://minio.example:9000), a GCS or Azure emulator; '' = "
                                    "AWS_ENDPOINT_URL_S3 / STORAGE_EMULATOR_HOST / the connection string, else the "
                                    "platform's")
    region: str = _f("", help="s3://: the bucket's region; '' = AWS_REGION / AWS_DEFAULT_REGION or the profile's")
    retry_seconds: float = _f(120.0, 0, 86_400, help="how long a listing or a fetch is retried on a 5xx, 429, "
                                                       "timeout or dropped connection before the run fails")
    fetchers: int = _f(8, 1, 256, help="objects fetched at once")
    spool_mb: int = _f(1024, 16, 1_048_576, help="fetched objects kept on local disk at once (TMPDIR) while "
                                                  "they are read and stored; a larger object is read alone")


BUCKET_KINDS = {"s3": "s3", "gcs": "gs", "azure": "az"}  # publish target kind: the scheme of its uri
PUBLISH_KINDS = (*BUCKET_KINDS, "flagd")


@dataclass(frozen=True)
class PublishTarget:
    """One place the routing table is published for the apps (pipeline/delivery/publish.py, docs/publishing.md).
    Credentials never go here: boto3 finds them as for an s3:// landing."""
    kind: str = setting(choices=PUBLISH_KINDS, help="s3, gcs, azure: one object per release in a versioned bucket; "
                                                     "flagd: a flagd flag file, one flag per release (OpenFeature)")
    uri: str = _f("", help="s3://bucket/prefix/, gs://bucket/prefix/ or az://container/prefix/; release R's table "
                           "is the object <prefix>routing-R.json")
    path: str = _f("", help="flagd: the flag file flagd or an in-process provider watches")
    name: str = _f("", help="its name in outputs and `pipeline routing --target NAME` (default: its uri or path)")
    cache_control: str = _f("max-age=60", help="the Cache-Control the object is served with: how long a phone "
                                               "or CDN may keep a copy before asking again")
    endpoint_url: str = _f("", help="an S3-compatible store's address; '' = AWS_ENDPOINT_URL_S3, else "
                                    "AWS_ENDPOINT_URL, else AWS S3 itself")
    region: str = _f("", help="the bucket's region; '' = AWS_REGION / AWS_DEFAULT_REGION or the profile's")

    @property
    def label(self) -> str:
        return self.name or self.uri or self.path


@dataclass(frozen=True)
class Publish:
    targets: tuple[PublishTarget, ...] = _f((), help="where each decision is published (none: only the files "
                                                    "of --routing-out / --routing-dir)")
    retry_seconds: float = _f(60.0, 0, 86_400, help="how long a write is retried on a 5xx, 429, timeout or "
                                                    "dropped connection before the publish counts as failed")


@dataclass(frozen=True)
class ArchiveSettings:
    """How long rows stay in the DuckDB file before they move to the archive, a Delta Lake table other tools
    read (pipeline/warehouse/archive.py, docs/archive.md)."""
    raw_events_days: int = _f(45, 1, 36_500, help="raw events of whole days older than this move to the archive: "
                                                  "at least window_days plus completeness_lag_hours")
    quarantine_days: int = _f(45, 1, 36_500, help="quarantined rows move to the archive this many whole days after "
                                                  "they were quarantined")
    device_day_days: int = _f(30, 1, 36_500, help="days of rollup_device_day kept (the gate's device-level rollup): "
                                                  "at least window_days plus the retention gate's horizon_days "
                                                  "plus completeness_lag_hours")
    location: str = _f("", help="a folder, s3://bucket/prefix or az://container/prefix holding the archive's "
                                "tables; '' = <db>.archive/ beside the DuckDB file")


def s3_endpoint(configured: str) -> str:
    """The S3 endpoint every AWS tool would use: `configured` (landing.endpoint_url), else AWS_ENDPOINT_URL_S3,
    else AWS_ENDPOINT_URL; '' for AWS S3 itself."""
    return configured or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""


# keys of the landing section that would hold a credential: refused with where credentials go instead
_SECRET_WORDS = ("secret", "password", "access_key", "token", "credential")


def _check_no_secrets(raw: dict) -> None:
    landing = raw.get("landing")
    if isinstance(landing, dict):
        for key in landing:
            if any(word in str(key).lower() for word in _SECRET_WORDS):
                raise ValueError(f"landing.{key}: credentials never go in this file (it is committed); set "
                                 "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or use an instance role")


@dataclass(frozen=True)
class Config:
    version: int = _f(1, 1, 1)
    min_rows_per_segment: int = _f(200, 1, 10_000_000)
    min_measured_rows: int = _f(100, 1, 10_000_000, help="rows with a value a p95 or rate gate needs")
    min_cloud_rows_for_baseline: int = _f(100, 1, 10_000_000)
    min_devices: int = _f(20, 2, 10_000_000, help="devices a figure needs for its device-level variance to be "
                          "trusted; with fewer, every device's rows count as fully correlated (the worst case)")
    window_days: int = _f(14, 1, 3650)
    completeness_lag_hours: float = _f(0.0, 0, 24 * 14, help="rows younger than this at --as-of are held back: "
                                       "telemetry of the last hours is incomplete, and late uploads come from weak "
                                       "and offline devices (the gate prints the arrival lag it measures)")
    tasks: tuple[str, ...] = _f((), blank=False, help="the product tasks task_overrides may name")
    network: Network = Network()
    gates: Gates = Gates()
    task_overrides: dict[str, Gates] = _f(None, help="per task: gate settings that differ from `gates`")
    statistics: Statistics = Statistics()
    assignment: Assignment = Assignment()
    routing: Routing = Routing()
    alerts: Alerts = Alerts()
    metrics: Metrics = Metrics()
    rollout: Rollout = Rollout()
    costs: Costs = Costs()
    engine: EngineSettings = EngineSettings()
    landing: LandingSettings = LandingSettings()
    archive: ArchiveSettings = ArchiveSettings()
    publish: Publish = Publish()
    source: str = ""
    digest: str = ""

    def gates_for(self, task: str) -> Gates:
        return (self.task_overrides or {}).get(task, self.gates)


def effective_sinks(alerts: Alerts) -> tuple[Sink, ...]:
    """`alerts.sinks`, else the sinks the older keys (stdout, jsonl_path, webhook_url) name."""
    if alerts.sinks:
        return alerts.sinks
    return tuple(s for s, on in ((Sink("stdout"), alerts.stdout), (Sink("jsonl", path=alerts.jsonl_path),
                                                                   bool(alerts.jsonl_path)),
                                 (Sink("webhook", url=alerts.webhook_url), bool(alerts.webhook_url))) if on)


def _check_sinks(alerts: Alerts) -> None:
    if alerts.sinks and (alerts.jsonl_path or alerts.webhook_url):
        old = "jsonl_path" if alerts.jsonl_path else "webhook_url"
        form = ("{kind: jsonl, path: " + repr(alerts.jsonl_path) + "}" if alerts.jsonl_path
                else "{kind: webhook, url: " + repr(alerts.webhook_url) + "}")
        raise ValueError(f"alerts.{old} and alerts.sinks both name receivers; list it in alerts.sinks instead: "
                         f"- {form}")
    names: set[str] = set()
    for i, sink in enumerate(alerts.sinks):
        for key in SINK_NEEDS.get(sink.kind, ()):
            if not getattr(sink, key):
                raise ValueError(f"alerts.sinks[{i}].{key} is required for a sink of kind {sink.kind}")
        if sink.label in names:
            raise ValueError(f"alerts.sinks[{i}]: a second sink named {sink.label!r}; give each a `name`")
        names.add(sink.label)


def _check_rollout(config: Config) -> None:
    r = config.rollout
    if r.fail_looks > r.window_looks:
        raise ValueError(f"rollout.fail_looks ({r.fail_looks}) must not exceed rollout.window_looks ({r.window_looks})")
    if r.recover_looks <= r.fail_looks:
        raise ValueError(f"rollout.recover_looks ({r.recover_looks}) must exceed rollout.fail_looks "
                         f"({r.fail_looks}): recovering needs more evidence than rolling back")
    names = set()
    for i, window in enumerate(r.windows):
        try:
            window.rule()
        except ValueError as exc:
            raise ValueError(f"rollout.windows[{i}].{exc}") from None
        if window.name in names:
            raise ValueError(f"rollout.windows[{i}]: a second window named {window.name!r}")
        names.add(window.name)


ARCHIVE_SCHEMES = ("s3://", "az://", "abfs://", "abfss://")  # the stores delta-rs is tested on here


def _check_archive(config: Config) -> None:
    """The archive never takes a day the gate still reads (its window and the late-data lag)."""
    a, lag_days = config.archive, -(-config.completeness_lag_hours // 24)
    needed = config.window_days + int(lag_days)
    lag = f" + completeness_lag_hours ({config.completeness_lag_hours:g} h)" if lag_days else ""
    if a.raw_events_days < needed:
        raise ValueError(f"archive.raw_events_days ({a.raw_events_days}) is shorter than the gate reads: "
                         f"window_days ({config.window_days}){lag} needs at least {needed} days")
    if "://" in a.location and not a.location.startswith(ARCHIVE_SCHEMES):
        # delta-rs writes GCS through its XML API, which no emulator here serves (gcp-storage-emulator: JSON only)
        raise ValueError(f"archive.location: {a.location!r}: the archive is a folder, s3://bucket/prefix or "
                         "az://container/prefix; gs:// archives are not supported yet (docs/archive.md)")
    horizon = int(-(-config.gates.retention.horizon_days // 1))
    if a.device_day_days < needed + horizon:
        raise ValueError(f"archive.device_day_days ({a.device_day_days}) is shorter than the gate reads: "
                         f"window_days ({config.window_days}){lag} + gates.retention.horizon_days ({horizon}) "
                         f"needs at least {needed + horizon} days")


def _check_publish(publish: Publish) -> None:
    names: set[str] = set()
    for i, target in enumerate(publish.targets):
        scheme = BUCKET_KINDS.get(target.kind)
        if scheme and (not target.uri.startswith(f"{scheme}://") or not target.uri[len(scheme) + 3:].split("/")[0]):
            raise ValueError(f"publish.targets[{i}].uri: {target.uri!r} is not {scheme}://bucket/prefix/")
        if target.kind == "flagd" and not target.path:
            raise ValueError(f"publish.targets[{i}].path is required for a target of kind flagd")
        if target.label in names:
            raise ValueError(f"publish.targets[{i}]: a second target named {target.label!r}; give each a `name`")
        names.add(target.label)


def _task_overrides(overrides: Any, config: Config) -> dict[str, Gates]:
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise ValueError(f"task_overrides must be a mapping of task to gate settings, got {overrides!r}")
    per_task: dict[str, Gates] = {}
    for task, gates in overrides.items():
        if str(task) not in config.tasks:
            declared = ", ".join(config.tasks) if config.tasks else "none"
            raise ValueError(f"task_overrides.{task}: unknown task {str(task)!r}; tasks declared in `tasks` of "
                             f"this file: {declared} (add it there if it is a new task)")
        per_task[str(task)] = build(Gates, gates, f"task_overrides.{task}", config.gates)
        for key in ("kill_rate.kill_codes", "retention.horizon_days"):
            gate, name = key.split(".")
            if getattr(getattr(per_task[str(task)], gate), name) != getattr(getattr(config.gates, gate), name):
                raise ValueError(f"task_overrides.{task}.{key}: counted alike for every task (a device's days span "
                                 f"tasks); set it under gates.{gate} only")
    return per_task


def load_config(path: Path | None = None) -> Config:
    path = Path(path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG)
    raw = read_yaml(path, "config") or {}
    try:
        overrides = raw.pop("task_overrides", None) if isinstance(raw, dict) else None
        if isinstance(raw, dict):
            _check_no_secrets(raw)
        config = build(Config, raw, "", Config(), skip=("source", "digest"))
        _check_rollout(config)
        _check_sinks(config.alerts)
        _check_archive(config)
        _check_publish(config.publish)
        per_task = _task_overrides(overrides, config)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return dataclasses.replace(config, task_overrides=per_task, source=str(path), digest=digest)
