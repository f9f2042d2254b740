"""Seeded, fast, realistic telemetry that follows the contract (shared/telemetry-contract.md).

`generate()` builds one Arrow table with the exact cast schema of pipeline/warehouse/schema.py;
`write_parquet()` splits it into files under `out_dir/release=<R>/`. numpy + pyarrow
only and vectorised: a million rows take 1-2 s.

The model
---------
Population. A pool of devices (about one per 20 requests, lognormal activity) with
a tier (low/mid/high/flagship 0.25/0.40/0.25/0.10), a RAM class (low 4 GB, mid
6|8, high 8|12, flagship 12|16), a SoC and OS that fit the tier and an NPU mostly
on high/flagship. Each request picks a device, a task (rewrite/intent/summarize
0.45/0.35/0.20) with lognormal prompt/output tokens (medians 150/60, 40/5,
300/120) and a network (wifi .45, 5g .15, 4g .25, 3g .07, 2g .03, offline .04,
unknown .01) with a lognormal RTT (wifi ~40 ms, 4g ~90, 3g ~350, 2g ~800; null
offline). The bucket is the contract's: offline; weak = a weak network type or an rtt at or above the
cut, as the shipped config sets them (SHIPPED_NETWORK); else normal.

Routing. 20 % of online requests (`Population.request_holdback`) are the cloud
hold-back baseline and 3 % are `edge_with_cloud_check`; the rest, and every offline
request, run on the edge. `Population.holdback_share` holds back whole devices instead.

Latency (ms, each part with lognormal noise, sigma 0.2). Cloud: ttft = 280 +
prompt / 2000 tok/s + 2-4 x rtt, and on 35 % of weak-network requests a retry
(1.5-4 s + another 2-4 x rtt); total = ttft + output / 80 tok/s. Edge: ttft =
50 + prompt / prefill speed (+ cold start), total = ttft + output / decode
speed, speeds by tier (healthy 1B INT4 on the NPU/GPU delegate: 300/45,
450/60, 700/80, 1000/105 tok/s). A cloud check adds a verification round trip;
an automatic fallback cuts the draft short (after 30-100 % of it) and adds a
re-serve on the check's open connection (cloud compute + 1-1.5 x rtt). Cold
starts hit 4-10 % of edge requests (most on low tier), healthy ~150-350 ms.

Memory (edge routes only, null for cloud): resident = the build's footprint,
peak = resident + activations + KV cache per token (healthy ~650 / ~960 MB).
Heat: the phone starts at ~34 C; edge compute heats it, saturating (rise =
Tmax * (1 - exp(-t / 30 s)), healthy Tmax 6 C); cloud requests barely warm it.
Throttling becomes likely above ~43 C.

Outcomes. Cloud, by task: adopted .92/.95/.90; the rest edited, regenerated,
undone, abandoned and failed (failed always with NETWORK or TIMEOUT). An edge
row draws one joint category (CATEGORIES): adopted; auto_fallback, re-served by
the cloud and then adopted (90 %), edited, regenerated or abandoned; a random edge
error (MODEL_LOAD_FAILED .45, TIMEOUT .35, OOM .10, LMK_KILLED .10) with outcome
failed; an undetected user fallback (edited/regenerated/undone); abandoned. Healthy
edge: adoption 0.5 % (relative) below the cloud, auto_fallback 5 %, errors 0.5 %,
undetected user fallback 0.15 %. So failure_detectability is ~0.97, and the
edge fallback rate (~0.05) stays within 0.03 of the cloud's (0.025-0.06),
which is mostly user fallback. Offline requests cannot be re-served: a row whose
draft a check rejected gets error_code NETWORK instead of auto_fallback, and
keeps its outcome.

Kills follow memory. Then the OS kills an edge request with a hazard that grows with its
expected peak over the phone's RAM, ratio = (resident + activations + KV per token x
(prompt + output tokens)) / RAM, as KILL_MAX / (1 + exp(-(ratio - KILL_MID) / KILL_SCALE))
(0.10, 0.45, 0.025), plus the scenario's per-tier `extra_kill_share`. A killed row becomes
an edge error, outcome failed, error_code OOM or LMK_KILLED (half each), and takes that
error's ttft / total / output tokens (an OOM before the first token, an LMK kill part way
through the decode). Healthy: ~0.1 % of edge requests are OOM / LMK_KILLED on every tier
(the random errors; 0.1-0.4 % of edge device-days); the postmortem build kills ~5 % of
low-tier (4 GB) requests, low_tier_memory ~9 %. Kills draw from a random stream of their
own: a row that is not killed is the row it would be without them, every column alike.

Injections for the guardrails (generate()'s keywords, 0 by default): `edge_churn` (a share of
the edge devices stop using the feature a day after their first request: retention) and
`edge_device_loss` (a share of the edge devices' telemetry never arrives, those killed most
first: a sample-ratio mismatch of the hold-back split, as is `Population(request_holdback=0.25)`).
They remove rows, so the table then has fewer than `rows`.

Devices differ (`Population`): by default only in activity (lognormal, sigma 0.7),
so rows are nearly independent. Real phones are not: `Population(device_adoption_sd=1,
activity_sigma=1.5, device_speed_sd=0.25)` gives each device its own adoption propensity
(a logit shift, the same on edge and cloud), its own speed (a lognormal factor on edge
compute) and heavy-tailed activity (a few phones send most requests), so one device's
requests are correlated and counting rows as independent overstates the evidence.
`edge_adoption_loss` takes an extra relative share of edge adoptions away (to
`abandoned`), exactly, on top of the scenario: the A/A scenario with 0.03 is a loss
exactly at the default tolerance.

Scenarios change the edge build or the environment (MODELS); SCENARIOS says how,
and which gates that breaks.

Why one module: one generative model whose parts (population, requests, regressions, injections) draw
from shared seeded streams in a fixed order, so that the same arguments keep giving byte-identical files.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.common.config import NETWORK_TYPES, Network
from pipeline.common.vocabulary import TIERS, Route, Tier
from pipeline.warehouse.schema import load_schema

SCENARIOS: dict[str, str] = {
    "healthy": "1B INT4 edge build that passes every gate in every segment",
    "postmortem": "the rollback case: 1.8B INT4 on CPU, slow (mid-tier p95 ~16 s), hot (p95 +9.5 C), adoption"
                  " 0.78 vs cloud 0.92, peak ~1.85 GB, which the OS kills on ~5 % of low-tier requests; fails"
                  " quality_loss everywhere, inference_duration and thermal on most rewrite/summarize segments,"
                  " weak_network_latency where edge is slowest, peak_memory and kill_rate on low tier (4 GB) only",
    "low_tier_memory": "healthy but a 1B INT8 build (peak ~2.0 GB, resident ~1.25 GB): fails peak_memory,"
                       " resident_memory and kill_rate on low tier (4 GB) only; the kills (~9 % of its requests)"
                       " also cost the low tier ~9 % of its adoption (quality_loss on its larger segments)",
    "sparse": "healthy data, meant for a small --rows (<= ~1000) so that every segment is insufficient_data",
    "aa": "A/A: edge outcomes drawn from the cloud's own outcome model (same adoption, fallback and"
          " failures); passes every gate",
    "adoption_loss_15": "healthy speed, memory and heat, but edge adoption 15 % (relative) below cloud, lost"
                        " to user and automatic fallbacks: fails quality_loss, fallback_rate and"
                        " failure_detectability",
    "weak_network_slow": "healthy, but edge rewrite/summarize wait on a blocking cloud policy check while the"
                         " cloud has a fast path: fails weak_network_latency in weak rewrite/summarize"
                         " segments",
    "fallback_spike": "healthy, but a stricter verifier rejects 20 % of edge drafts (auto_fallback, adoption"
                      " unchanged): fails fallback_rate in every online segment",
    "cold_start_slow_low": "healthy, but low-tier phones reload the model often and slowly (p95 ~1.4 s):"
                           " fails cold_start on low tier only",
    "low_tier_kills": "healthy, but the low-memory killer takes the app in the background on low-tier phones:"
                      " ~3 % of low-tier edge device-days have an OOM / LMK_KILLED kill (healthy ~0.3 %);"
                      " fails kill_rate on low tier only",
    "chip_regression": "a new build (llama3.2-1b-int4-npu2), healthy except on MediaTek chips (helio-g85,"
                       " dimensity-*) whose NPU is not ready"
                       " (npu_ready = false) on android-14: the build falls back to the CPU (8x slower, p95"
                       " ~16 s on a low-tier rewrite) and doubles its memory (peak ~1.9 GB, 0.47 of a 4 GB"
                       " phone); ~8 % of low-tier and ~5 % of mid-tier devices; fails peak_memory,"
                       " inference_duration and kill_rate where that cell is large enough (low tier)",
}

SHIPPED_NETWORK = Network()  # the shipped weak-network cut and weak network types (a config may differ)

TASKS = ("rewrite", "intent", "summarize")
TASK_P = (0.45, 0.35, 0.20)
# (median, sigma) of lognormal prompt and output tokens per task
TOKENS = {"rewrite": ((150, 0.35), (60, 0.30)), "intent": ((40, 0.35), (5, 0.30)),
          "summarize": ((300, 0.30), (120, 0.25))}
TIER_P = (0.25, 0.40, 0.25, 0.10)
MEM_CLASSES = {Tier.LOW: ((4,), (1.0,)), Tier.MID: ((6, 8), (0.6, 0.4)), Tier.HIGH: ((8, 12), (0.6, 0.4)),
               Tier.FLAGSHIP: ((12, 16), (0.6, 0.4))}
SOCS = {Tier.LOW: ("helio-g85", "unisoc-t606", "snapdragon-480", "exynos-850"),
        Tier.MID: ("snapdragon-7gen1", "dimensity-7050", "exynos-1380", "snapdragon-778g"),
        Tier.HIGH: ("snapdragon-8gen1", "dimensity-8300", "tensor-g3", "apple-a15"),
        Tier.FLAGSHIP: ("snapdragon-8gen3", "dimensity-9300", "apple-a17-pro", "tensor-g4")}
ALL_SOCS = tuple(s for tier in TIERS for s in SOCS[tier])
NPU_P = (0.15, 0.45, 0.85, 0.95)
ANDROID = ("android-12", "android-13", "android-14", "android-15")
IOS = ("ios-17", "ios-18")
NETWORKS = NETWORK_TYPES
NETWORK_P = (0.45, 0.15, 0.25, 0.07, 0.03, 0.04, 0.01)
RTT = {"wifi": (40, 0.5), "5g": (45, 0.5), "4g": (90, 0.5), "3g": (350, 0.45), "2g": (800, 0.45),
       "offline": (1, 0), "unknown": (150, 0.6)}
ROUTES = (Route.EDGE.value, Route.CLOUD.value, Route.EDGE_WITH_CLOUD_CHECK.value)  # the codes 0, 1, 2 below

# Outcome categories: (outcome, a check rejected the edge draft, edge/cloud error).
CATEGORIES = (("adopted", False, False), ("adopted", True, False), ("edited", True, False),
              ("regenerated", True, False), ("undone", True, False), ("abandoned", True, False),
              ("failed", False, True), ("edited", False, False), ("regenerated", False, False),
              ("undone", False, False), ("abandoned", False, False))
(ADOPT, AUTO_ADOPT, AUTO_EDIT, AUTO_REGEN, AUTO_UNDO, AUTO_ABANDON,
 ERROR, EDIT, REGEN, UNDO, ABANDON) = range(len(CATEGORIES))
OUTCOMES = ("adopted", "edited", "regenerated", "undone", "abandoned", "failed")
# cloud outcome model per task: adopted, edited, regenerated, undone, abandoned, failed
CLOUD_OUTCOMES = {"rewrite": (0.92, 0.03, 0.015, 0.005, 0.025, 0.005),
                  "intent": (0.95, 0.01, 0.01, 0.005, 0.02, 0.005),
                  "summarize": (0.90, 0.03, 0.02, 0.01, 0.035, 0.005)}
AUTO_SPLIT = {AUTO_ADOPT: 0.90, AUTO_EDIT: 0.05, AUTO_REGEN: 0.03, AUTO_ABANDON: 0.02}
USER_SPLIT = {EDIT: 0.5, REGEN: 0.3, UNDO: 0.2}
ERROR_CODES = ("OOM", "LMK_KILLED", "MODEL_LOAD_FAILED", "TIMEOUT", "NETWORK")
OOM, LMK, LOAD_FAILED, TIMEOUT, NETWORK = range(5)
EDGE_ERROR_P = (0.10, 0.10, 0.45, 0.35)  # of random edge errors: OOM, LMK_KILLED, MODEL_LOAD_FAILED, TIMEOUT
# kill hazard of an edge request: KILL_MAX / (1 + exp(-(peak memory ratio - KILL_MID) / KILL_SCALE))
KILL_MAX, KILL_MID, KILL_SCALE = 0.10, 0.45, 0.025
EDGE_TIMEOUT_MS = 12_000.0
CLOUD_TIMEOUT_MS = 15_000.0


@dataclass(frozen=True)
class Population:
    """How devices differ (module docstring, "Heterogeneous users")."""

    activity_sigma: float = 0.7  # lognormal sigma of requests per device
    device_adoption_sd: float = 0.0  # sd of a device's logit shift of adoption (edge and cloud alike)
    device_speed_sd: float = 0.0  # sd of a device's log factor on edge compute time
    rows_per_device: float = 20.0  # the population has about rows / this devices
    # the heterogeneity family (issue 25): 0 / None leave the defaults above in charge
    devices: int = 0  # the population's size (instead of rows / rows_per_device)
    adoption_concentration: float = 0.0  # per-device adoption propensity ~ Beta(c p, c (1 - p)) around the task's
    activity_pareto: float = 0.0  # tail index of Pareto activity (instead of lognormal); 1.1-1.3 is a real app
    chatty_share: float = 0.0  # this share of devices sends CHATTY_FACTOR x its activity (bots, test phones)
    holdback_share: float = 0.0  # a device's requests all go to the cloud with this probability (per device)
    # without holdback_share: the cloud share of online requests (per request); out of the repr, which seeds
    # the event ids, so that the populations made before it keep theirs
    request_holdback: float = dataclasses.field(default=0.20, repr=False)
    arrival_days: float = 0.0  # devices join uniformly over the first this many days of the rollout
    # the devices drawn from a stream of their own with this seed: calls with other seeds (days) share them;
    # out of the repr, like request_holdback
    device_seed: int | None = dataclasses.field(default=None, repr=False)


CHATTY_FACTOR = 30.0


INDEPENDENT = Population()
CLUSTERED = Population(activity_sigma=1.5, device_adoption_sd=1.0, device_speed_sd=0.25)


@dataclass(frozen=True)
class _Regression:
    """A device-matrix cell (SoC name prefixes x NPU readiness x OS versions) where the build runs
    `slowdown` times slower and with `memory_factor` times its resident and activation memory."""

    soc_prefixes: tuple[str, ...]
    npu_ready: bool
    os_versions: tuple[str, ...]
    slowdown: float
    memory_factor: float

    def affected(self, dev: dict[str, Any]) -> np.ndarray:
        """Per device: in the cell (a null SoC, OS or NPU flag is not)."""
        socs = [i for i, s in enumerate(ALL_SOCS) if s.startswith(self.soc_prefixes)]
        oses = [i for i, s in enumerate(ANDROID + IOS) if s in self.os_versions]
        return (np.isin(dev["soc"], socs) & np.isin(dev["os"], oses) & ~dev["npu_null"]
                & (dev["npu"] == self.npu_ready))


@dataclass(frozen=True)
class _Model:
    """Edge model and environment parameters of one scenario (per-tier tuples: low, mid, high, flagship)."""

    model_id: str = "llama3.2-1b-int4"
    prefill_tps: tuple[float, ...] = (300, 450, 700, 1000)
    decode_tps: tuple[float, ...] = (45, 60, 80, 105)
    fixed_ms: float = 50.0
    resident_mb: float = 650.0
    activation_mb: float = 300.0
    kv_mb_per_token: float = 0.03
    cold_share: tuple[float, ...] = (0.10, 0.07, 0.05, 0.04)
    cold_median_ms: tuple[float, ...] = (240, 230, 220, 210)
    thermal_max_c: float = 6.0
    adoption_loss: float = 0.005  # relative to the cloud baseline
    lost_to_fallback: bool = False  # lost adoption goes to fallbacks (else to 'abandoned')
    auto_share: float = 0.05
    rejected_after: tuple[float, float] = (0.3, 1.0)  # share of a rejected draft decoded before rejection
    error_share: float = 0.005
    user_fallback_share: float = 0.0015
    same_as_cloud: bool = False  # A/A: edge outcomes follow the cloud model
    cloud_rtt_factor: tuple[float, float] = (2.0, 4.0)
    cloud_retry_p: tuple[float, float] = (0.02, 0.35)  # normal, weak
    edge_check_rtt: float = 0.0  # blocking cloud round trips before an online rewrite/summarize edge request
    extra_kill_share: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)  # kill hazard per edge request on top of memory's
    regression: _Regression | None = None  # one device-matrix cell where the build misbehaves


MODELS: dict[str, _Model] = {
    "healthy": _Model(),
    "sparse": _Model(),
    "postmortem": _Model(model_id="qwen2.5-1.8b-int4", prefill_tps=(40, 60, 110, 180),
                         decode_tps=(9, 15, 24, 33), resident_mb=900, activation_mb=930, kv_mb_per_token=0.05,
                         cold_median_ms=(290, 275, 260, 245), thermal_max_c=20.0,
                         adoption_loss=1 - 0.78 / 0.92),
    "low_tier_memory": _Model(model_id="llama3.2-1b-int8", resident_mb=1250, activation_mb=780),
    "aa": _Model(same_as_cloud=True),
    "adoption_loss_15": _Model(adoption_loss=0.15, lost_to_fallback=True),
    "weak_network_slow": _Model(cloud_rtt_factor=(0.8, 1.2), cloud_retry_p=(0.0, 0.0), edge_check_rtt=1.6),
    "fallback_spike": _Model(auto_share=0.20, rejected_after=(0.05, 0.15)),
    "cold_start_slow_low": _Model(cold_share=(0.35, 0.07, 0.05, 0.04), cold_median_ms=(1050, 230, 220, 210)),
    "low_tier_kills": _Model(extra_kill_share=(0.022, 0.0, 0.0, 0.0)),
    "chip_regression": _Model(model_id="llama3.2-1b-int4-npu2",
                              regression=_Regression(("helio", "dimensity"), False, ("android-14",),
                                                     slowdown=8.0, memory_factor=2.0)),
}


def generate(release: str, rows: int, scenario: str = "healthy", seed: int = 0,
             start: datetime | None = None, days: int = 7, bad_rows: int = 0,
             population: Population = INDEPENDENT, edge_adoption_loss: float = 0.0,
             edge_device_loss: float = 0.0, edge_churn: float = 0.0) -> pa.Table:
    """Return `rows` telemetry events of `scenario` for `release` (seed >= 0), in event_time order.

    The same arguments give the same table. The population (devices, tasks, networks) depends
    on seed and release only, so scenarios with one seed differ only by what they change;
    event_ids depend on every argument, so no two different calls share one. event_time is
    uniform over [start, start + days), default start midnight UTC (naive) of today - days.
    `bad_rows` random rows are then made to break one or two contract row rules each,
    cycling through _BAD_KINDS (all rule kinds appear once bad_rows >= 10).
    `population` sets how devices differ; `edge_adoption_loss` removes that relative share of
    edge adoptions. Two injections then remove rows, so the table has fewer than `rows`:
    `edge_churn` (retention): this share of the devices with edge rows, picked at random, stop
    using the feature a day after their first request (their edge rows later than that go);
    `edge_device_loss` (sample-ratio mismatch): the edge rows of this share of the devices
    with edge rows never arrive, the devices with the highest mean kill hazard first. Under
    a per-device hold-back (Population.holdback_share) a device's rows are all edge rows or
    all cloud rows, so both take whole devices. `bad_rows` are made after the removal.
    Raises ValueError for an unknown scenario or impossible counts.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; valid scenarios: {', '.join(SCENARIOS)}")
    for name, share in (("edge_adoption_loss", edge_adoption_loss), ("edge_device_loss", edge_device_loss),
                        ("edge_churn", edge_churn)):
        if not 0 <= share < 1:
            raise ValueError(f"{name} must be in [0, 1) (got {share})")
    if not 0 <= population.request_holdback <= 0.97:
        raise ValueError(f"request_holdback must be in [0, 0.97] (got {population.request_holdback})")
    if rows < 0 or days < 1 or not 0 <= bad_rows <= rows:
        raise ValueError(f"need rows >= 0, days >= 1 and 0 <= bad_rows <= rows "
                         f"(got rows={rows}, days={days}, bad_rows={bad_rows})")
    start = _start(start, days)
    model = MODELS[scenario]
    rng = np.random.default_rng([seed, *_words(release), 1])
    call = f"{release}|{scenario}|{rows}|{start}|{days}|{bad_rows}"
    if population != INDEPENDENT or edge_adoption_loss:
        call += f"|{population}|{edge_adoption_loss}"
    if population.request_holdback != INDEPENDENT.request_holdback:
        call += f"|{population.request_holdback}"
    if edge_device_loss or edge_churn:
        call += f"|{edge_device_loss}|{edge_churn}"
    id_rng = np.random.default_rng([seed, *_words(call), 2])
    # kills draw from a stream of their own, so the main stream, and so every row not killed, is as without them
    kill_rng = np.random.default_rng([seed, *_words(release), 3])
    cols = _events(rng, kill_rng, rows, model, population, edge_adoption_loss)
    arrival = cols.pop("_arrival_days")
    device, hazard = cols.pop("_device"), cols.pop("_kill_hazard")
    t0 = int((start - datetime(1970, 1, 1)) / timedelta(microseconds=1))
    if arrival is None:
        cols["event_time"] = np.sort(t0 + rng.integers(0, days * 86_400_000_000, rows, dtype=np.int64))
    else:  # a device's requests fall between its arrival and the end
        first = np.minimum(arrival, days - 1e-6)
        offset = (first + rng.random(rows) * (days - first)) * 86_400_000_000
        cols["event_time"] = t0 + offset.astype(np.int64)
    cols["release"] = _strings((release,), np.zeros(rows, dtype=np.int32))
    patch = rng.choice(3, rows, p=(0.7, 0.2, 0.1))
    cols["app_version"] = _strings(tuple(f"{release}.{i}" for i in range(3)), patch)
    cols["event_id"] = _uuid4_text(id_rng, rows)
    table = _to_table(cols)
    if edge_device_loss or edge_churn:
        edge = ~np.isnan(cols["peak_mem_mb"])
        keep = _kept(seed, release, device, edge, hazard, cols["event_time"], edge_device_loss, edge_churn)
        table = table.filter(pa.array(keep))
    if arrival is not None:
        table = table.take(pc.sort_indices(table, [("event_time", "ascending")]))
    if bad_rows:
        future = max(start + timedelta(days=days), _today()) + timedelta(days=3)
        table = _break_rows(table, rng, bad_rows, future)
    return table


def write_parquet(out_dir: Path, release: str, rows: int, scenario: str = "healthy", seed: int = 0,
                  start: datetime | None = None, days: int = 7, files: int = 1, bad_rows: int = 0,
                  edge_device_loss: float = 0.0, edge_churn: float = 0.0, population: Population | None = None,
                  progress: Callable[[int, int, str], None] | None = None) -> list[Path]:
    """Write `generate(...)` as `files` zstd Parquet parts sorted by event_time; return their paths.

    Files go to `out_dir/release=<release>/part-<i>-<scenario>-s<seed>.parquet` (folders are
    created). The same arguments give byte-identical files. `progress(done, total, doing)` is told of the
    generation and of each file written (files + 1 steps).
    """
    if files < 1:
        raise ValueError(f"files must be >= 1 (got {files})")
    if progress:
        progress(0, files + 1, f"generating {rows:,} rows")
    table = generate(release, rows, scenario, seed, start, days, bad_rows, edge_device_loss=edge_device_loss,
                     edge_churn=edge_churn, population=population or INDEPENDENT)
    table = table.take(pc.sort_indices(table, [("event_time", "ascending")]))
    if progress:
        progress(1, files + 1, f"{table.num_rows:,} rows generated")
    folder = Path(out_dir) / f"release={release}"
    folder.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, table.num_rows, files + 1).astype(np.int64)
    paths = []
    for i in range(files):
        path = folder / f"part-{i}-{scenario}-s{seed}.parquet"
        part = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        pq.write_table(part, path, compression="zstd")
        paths.append(path)
        if progress:
            progress(i + 2, files + 1, path.name)
    return paths


# ---------------------------------------------------------------- helpers


def _today() -> datetime:
    return datetime.combine(datetime.now(UTC).date(), time())


def _start(start: datetime | None, days: int) -> datetime:
    if start is None:
        return _today() - timedelta(days=days)
    if start.tzinfo is not None:
        start = start.astimezone(UTC).replace(tzinfo=None)
    return start


def _words(text: str) -> list[int]:
    digest = hashlib.sha256(text.encode()).digest()
    return [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]


def _uuid4_text(rng: np.random.Generator, n: int) -> pa.Array:
    """n random UUID4 strings built from random bytes without a Python loop."""
    raw = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    return _hex_strings(raw, dashes=True)


def _hex_strings(raw: np.ndarray, dashes: bool = False) -> pa.Array:
    n, width = raw.shape
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    hexed = np.empty((n, 2 * width), dtype=np.uint8)
    hexed[:, 0::2] = digits[raw >> 4]
    hexed[:, 1::2] = digits[raw & 0x0F]
    if dashes:
        out = np.full((n, 36), ord("-"), dtype=np.uint8)
        for src, dst in ((0, 0), (8, 9), (12, 14), (16, 19), (20, 24)):
            size = {0: 8, 20: 12}.get(src, 4)
            out[:, dst:dst + size] = hexed[:, src:src + size]
        hexed = out
    length = hexed.shape[1]
    offsets = np.arange(0, (n + 1) * length, length, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(hexed.tobytes())])


def _lognormal(rng: np.random.Generator, median: np.ndarray | float, sigma: np.ndarray | float,
               n: int) -> np.ndarray:
    return np.asarray(median) * np.exp(np.asarray(sigma) * rng.standard_normal(n))


def _strings(values: tuple[str, ...], idx: np.ndarray) -> pa.Array:
    """values[idx] as an Arrow string array; idx < 0 means null."""
    return pa.array(values, pa.string()).take(pa.array(idx, pa.int32(), mask=idx < 0))


def _devices(rng: np.random.Generator, count: int, pop: Population) -> dict[str, np.ndarray | pa.Array]:
    tier = rng.choice(4, count, p=TIER_P)
    mem = np.empty(count, dtype=np.int32)
    soc = np.empty(count, dtype=np.int32)
    for t, name in enumerate(TIERS):
        here = tier == t
        sizes, probs = MEM_CLASSES[name]
        mem[here] = rng.choice(sizes, here.sum(), p=probs)
        soc[here] = 4 * t + rng.integers(0, 4, here.sum())
    apple = np.isin(soc, [i for i, s in enumerate(ALL_SOCS) if s.startswith("apple")])
    os_version = np.where(apple, len(ANDROID) + rng.integers(0, len(IOS), count),
                          rng.choice(len(ANDROID), count, p=(0.1, 0.25, 0.4, 0.25)))
    soc[rng.random(count) < 0.01] = -1
    os_version[rng.random(count) < 0.005] = -1
    activity = rng.lognormal(0, pop.activity_sigma, count)
    if pop.activity_pareto:
        activity = rng.pareto(pop.activity_pareto, count) + 1.0
    if pop.chatty_share:
        activity = np.where(rng.random(count) < pop.chatty_share, activity * CHATTY_FACTOR, activity)
    return {"tier": tier, "mem": mem, "soc": soc, "os": os_version,
            "npu": rng.random(count) < np.take(NPU_P, tier), "npu_null": rng.random(count) < 0.01,
            "activity": activity,
            # heterogeneity family: drawn only when asked for, so the other populations' random streams stay
            "propensity_u": rng.random((count, len(TASKS))) if pop.adoption_concentration else None,
            "holdback": rng.random(count) < pop.holdback_share if pop.holdback_share else None,
            "arrival": rng.random(count) * pop.arrival_days if pop.arrival_days else None,
            "id": _hex_strings(rng.integers(0, 256, (count, 8), dtype=np.uint8)),
            # drawn only when asked for, so the default population's random stream is the one it always was
            "adoption_shift": pop.device_adoption_sd * rng.standard_normal(count) if pop.device_adoption_sd
            else np.zeros(count),
            "speed": np.exp(pop.device_speed_sd * rng.standard_normal(count)) if pop.device_speed_sd
            else np.ones(count)}


def _cell_probs(model: _Model) -> np.ndarray:
    """Category probabilities per (task, tier, bucket, route group 0 cloud / 1 edge), shape [72, 11]."""
    probs = np.zeros((len(TASKS), 2, len(CATEGORIES)))
    for k, task in enumerate(TASKS):
        adopted, edited, regen, undone, abandoned, failed = CLOUD_OUTCOMES[task]
        cloud = np.zeros(len(CATEGORIES))
        cloud[[ADOPT, EDIT, REGEN, UNDO, ABANDON, ERROR]] = adopted, edited, regen, undone, abandoned, failed
        if model.same_as_cloud:  # edge fails like the cloud, but its checks catch what users fall back from
            edge = cloud.copy()
            edge[[AUTO_EDIT, AUTO_REGEN, AUTO_UNDO]] = edge[[EDIT, REGEN, UNDO]]
            edge[[EDIT, REGEN, UNDO]] = 0
        else:
            edge = np.zeros(len(CATEGORIES))
            for cat, share in AUTO_SPLIT.items():
                edge[cat] = model.auto_share * share
            for cat, share in USER_SPLIT.items():
                edge[cat] = model.user_fallback_share * share
            edge[ERROR] = model.error_share
            target = adopted * (1 - model.adoption_loss)
            if model.lost_to_fallback:  # from healthy adoption, half to user fallback, half to the checks
                lost = adopted * (1 - MODELS["healthy"].adoption_loss) - target
                for cat, share in USER_SPLIT.items():
                    edge[cat] += lost / 2 * share
                for cat in (AUTO_EDIT, AUTO_REGEN, AUTO_ABANDON):
                    edge[cat] += lost / 6
            edge[ADOPT] = target - edge[AUTO_ADOPT]
            edge[ABANDON] = 1 - edge.sum()
            if edge.min() < 0:
                raise AssertionError(f"{task}: edge outcome model does not add up: {edge}")
        probs[k] = cloud, edge
    # same distribution for every tier and bucket of a task
    shape = (len(TASKS), len(TIERS), 3, 2, len(CATEGORIES))
    return np.broadcast_to(probs[:, None, None], shape).reshape(-1, len(CATEGORIES))


def _draw_categories(rng: np.random.Generator, cell: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """One independent category draw per row from its cell's distribution `probs[cell]`:
    real sampling noise, which is what the gate's statistics exist to handle."""
    u = rng.random(len(cell))
    # one sorted list of all cells' category edges: cell c's edges are c + cdf_c, so a single
    # searchsorted of c + u finds the category (minus the c * (K - 1) edges of earlier cells)
    inner = np.cumsum(probs, axis=1)[:, :-1]
    edges = (np.arange(len(probs))[:, None] + np.minimum(inner, 1.0)).ravel()
    return np.searchsorted(edges, cell + u, side="right") - cell * inner.shape[1]


def _shifted(a: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """expit(logit(a) + shift): a cell's chance of ADOPT moved by its device's logit shift."""
    a = a.clip(1e-9, 1 - 1e-9)
    return 1 / (1 + np.exp(-(np.log(a / (1 - a)) + shift)))


def _device_adoption(rng: np.random.Generator, cat: np.ndarray, probs: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Move rows between ADOPT and ABANDON so that a row's chance of ADOPT is `target` (its device's)."""
    a = probs[:, ADOPT].clip(1e-9, 1 - 1e-9)
    u = rng.random(len(cat))
    up = (target > a) & (cat != ADOPT) & (u < (target - a) / (1 - a))
    down = (target < a) & (cat == ADOPT) & (u < (a - target) / a)
    return np.where(up, ADOPT, np.where(down, ABANDON, cat))


def _propensity_target(dev: dict, d: np.ndarray, task: np.ndarray, probs: np.ndarray, pop: Population) -> np.ndarray:
    """A row's chance of ADOPT: its device's own propensity for the task, Beta(c p, c (1 - p)) around the task's
    cloud adoption p (drawn from the device's uniform by the Beta's quantile function), times the row's cell
    over the cloud's (the edge's relative loss applies to every user alike), within [0, 1]."""
    from scipy.special import betaincinv  # the simulator's heterogeneity family only

    c = pop.adoption_concentration
    p_task = np.array([CLOUD_OUTCOMES[t][0] for t in TASKS])[task]
    propensity = betaincinv(c * p_task, c * (1 - p_task), dev["propensity_u"][d, task])
    return np.clip(propensity * probs[:, ADOPT] / p_task, 0.0, 1.0)


def _kill_hazard(m: _Model, tokens: np.ndarray, mem_gb: np.ndarray, tier: np.ndarray) -> np.ndarray:
    """An edge request's chance that the OS kills the app: logistic in its expected peak memory over the
    phone's RAM (no noise: the same tokens on the same RAM class, the same hazard), plus the tier's extra."""
    ratio = (m.resident_mb + m.activation_mb + m.kv_mb_per_token * tokens) / (mem_gb * 1024)
    return KILL_MAX / (1 + np.exp(-(ratio - KILL_MID) / KILL_SCALE)) + np.take(m.extra_kill_share, tier)


def _kept(seed: int, release: str, device: np.ndarray, edge: np.ndarray, hazard: np.ndarray, when: np.ndarray,
          device_loss: float, churn: float) -> np.ndarray:
    """Rows left after the injections of generate(): `churn` and `device_loss` of the devices with edge rows."""
    devices, rows = np.unique(device[edge], return_counts=True)
    drop = np.zeros(len(device), dtype=bool)
    if device_loss:
        mean = np.bincount(device[edge], hazard[edge])[devices] / rows
        ties = np.random.default_rng([seed, *_words(release), 4]).random(len(devices))
        lost = devices[np.lexsort((ties, -mean))[:round(device_loss * len(devices))]]
        drop |= edge & np.isin(device, lost)
    if churn:
        gone = np.random.default_rng([seed, *_words(release), 5]).choice(
            devices, round(churn * len(devices)), replace=False)
        first = np.full(device.max() + 1, np.iinfo(np.int64).max)
        np.minimum.at(first, device, when)
        drop |= edge & np.isin(device, gone) & (when > first[device] + 86_400_000_000)
    return ~drop


def _events(rng: np.random.Generator, kill_rng: np.random.Generator, n: int, m: _Model,
            pop: Population = INDEPENDENT, edge_adoption_loss: float = 0.0) -> dict[str, np.ndarray | pa.Array]:
    """All per-request columns except event_time / release / app_version (NaN = null).

    Kills (OOM / LMK_KILLED by memory) draw from `kill_rng` only, so `rng` is consumed as without them."""
    device_rng = rng if pop.device_seed is None else np.random.default_rng([pop.device_seed, 5])
    dev = _devices(device_rng, pop.devices or max(50, int(n / pop.rows_per_device)), pop)
    d = rng.choice(len(dev["tier"]), n, p=dev["activity"] / dev["activity"].sum())
    tier = dev["tier"][d]
    task = rng.choice(len(TASKS), n, p=TASK_P)
    net = rng.choice(len(NETWORKS), n, p=NETWORK_P)
    offline = net == NETWORKS.index("offline")
    rtt_median, rtt_sigma = np.array([RTT[x] for x in NETWORKS]).T
    rtt = np.where(offline, np.nan, np.round(_lognormal(rng, rtt_median[net], rtt_sigma[net], n)))
    rtt0 = np.nan_to_num(rtt)
    weak_types = [NETWORKS.index(t) for t in SHIPPED_NETWORK.weak_network_types]
    weak = np.isin(net, weak_types) | (rtt0 >= SHIPPED_NETWORK.weak_rtt_ms)
    bucket = np.where(offline, 2, weak.astype(int))

    r = rng.random(n)
    if dev["holdback"] is not None:  # a device is in the hold-back or not, all its requests alike
        held = dev["holdback"][d]
        route = np.where(held, 1, np.where(offline | (r >= 0.03), 0, 2))
    else:
        cut = pop.request_holdback
        route = np.where(offline | (r >= cut + 0.03), 0, np.where(r < cut, 1, 2))  # 0 edge, 1 cloud, 2 with check
    cloud = route == 1
    edge = ~cloud

    tok = np.array([TOKENS[t] for t in TASKS])  # [task, prompt | output, median | sigma]
    prompt = np.maximum(1, np.rint(_lognormal(rng, tok[task, 0, 0], tok[task, 0, 1], n)))
    output = np.maximum(1, np.rint(_lognormal(rng, tok[task, 1, 0], tok[task, 1, 1], n)))

    cell = ((task * 4 + tier) * 3 + bucket) * 2 + edge
    probs = _cell_probs(m)
    cat = _draw_categories(rng, cell, probs)
    p_adopt = probs[cell, ADOPT]  # a row's chance of ADOPT, after its device's own propensity
    if pop.device_adoption_sd:
        p_adopt = _shifted(p_adopt, dev["adoption_shift"][d])
        cat = _device_adoption(rng, cat, probs[cell], p_adopt)
    if pop.adoption_concentration:
        p_adopt = _propensity_target(dev, d, task, probs[cell], pop)
        cat = _device_adoption(rng, cat, probs[cell], p_adopt)
    if edge_adoption_loss:
        # exact per row, so per device: ADOPT rows go with the probability that removes this share of the
        # row's whole chance of adoption (its device's ADOPT plus the auto-adopted share)
        a = probs[cell, ADOPT].clip(1e-9, 1 - 1e-9)  # _device_adoption took raised ADOPT rows from the others
        p_auto = probs[cell, AUTO_ADOPT] * np.where(p_adopt > a, (1 - p_adopt) / (1 - a), 1.0)
        lose = edge_adoption_loss * (p_adopt + p_auto) / np.maximum(p_adopt, 1e-12)
        flip = edge & (cat == ADOPT) & (rng.random(n) < lose)
        cat = np.where(flip, ABANDON, cat)
    hazard = np.where(edge, _kill_hazard(m, prompt + output, dev["mem"][d], tier), 0.0)
    # the scenario's regressed cell: per row, its slowdown and memory factor (1 elsewhere; no random draw, so
    # the streams stay as they were)
    slowdown, memory_factor = np.ones(n), np.ones(n)
    if m.regression is not None:
        g = m.regression
        hit = g.affected(dev)[d]
        slowdown, memory_factor = np.where(hit, g.slowdown, 1.0), np.where(hit, g.memory_factor, 1.0)
        heavy = dataclasses.replace(m, resident_mb=m.resident_mb * g.memory_factor,
                                    activation_mb=m.activation_mb * g.memory_factor)
        hazard = np.where(edge & hit, _kill_hazard(heavy, prompt + output, dev["mem"][d], tier), hazard)
    killed = (cat != ERROR) & (kill_rng.random(n) < hazard)
    kill_code = np.where(kill_rng.random(n) < 0.5, OOM, LMK)
    cat = np.where(killed, ERROR, cat)
    checked = np.array([c[1] for c in CATEGORIES])[cat]  # a check rejected the edge draft
    auto = checked & ~offline  # offline: no cloud to re-serve it
    error_cat = cat == ERROR

    # cloud latency: 280 ms + 2000 tok/s prefill + 80 tok/s decode, plus the network
    c_prefill = (280 + prompt / 2.0) * _lognormal(rng, 1, 0.2, n)
    c_decode = output / 80 * 1000 * _lognormal(rng, 1, 0.2, n)
    net_ms = rtt0 * rng.uniform(*m.cloud_rtt_factor, n)
    retry = rng.random(n) < np.where(weak, m.cloud_retry_p[1], m.cloud_retry_p[0])
    net_ms += retry * (rng.uniform(1500, 4000, n) + rtt0 * rng.uniform(*m.cloud_rtt_factor, n))
    c_ttft = c_prefill + net_ms
    c_total = c_ttft + c_decode
    # re-serving a rejected draft: one more call on the connection the check opened (no handshake, no retry)
    reserve_ms = c_prefill + c_decode + rtt0 * rng.uniform(1, 1.5, n)

    # edge latency
    cold = edge & (rng.random(n) < np.take(m.cold_share, tier))
    cold_ms = np.where(cold, _lognormal(rng, np.take(m.cold_median_ms, tier), 0.18, n), 0.0)
    check = ~offline & (task != TASKS.index("intent"))  # generative tasks only
    check_ms = np.where(check, m.edge_check_rtt * (100 + rtt0 * rng.uniform(0.7, 1.3, n)), 0.0)
    speed = dev["speed"][d]  # a device's own slowness (thermal design, background load)
    speed = speed * slowdown
    e_compute = (m.fixed_ms + prompt / np.take(m.prefill_tps, tier) * 1000) * _lognormal(rng, 1, 0.2, n) * speed
    e_ttft = e_compute + cold_ms + check_ms
    e_decode = output / np.take(m.decode_tps, tier) * 1000 * _lognormal(rng, 1, 0.2, n) * speed
    e_decode *= np.where(auto, rng.uniform(*m.rejected_after, n), 1.0)  # a rejected draft is cut short
    e_total = e_ttft + e_decode + np.where(route == 2, 120 + rtt0 * rng.uniform(1, 2, n), 0.0)
    e_total += np.where(auto, reserve_ms, 0.0)
    compute_s = (e_compute + e_decode) / 1000

    ttft = np.where(cloud, c_ttft, e_ttft)
    total = np.where(cloud, c_total, e_total)

    # error codes (index into ERROR_CODES, -1 = none); how far the request got sets ttft / output / total
    err = np.where(offline & checked, NETWORK, -1)
    ce, ee = cloud & error_cat, edge & error_cat
    err[ce] = np.where(rng.random(ce.sum()) < np.where(weak[ce], 0.85, 0.5), NETWORK, TIMEOUT)
    drawn = ee & ~killed  # the random edge errors: as many draws from rng as without kills
    err[drawn] = rng.choice(len(EDGE_ERROR_P), drawn.sum(), p=EDGE_ERROR_P)
    err[killed] = kill_code[killed]
    frac = rng.uniform(0.2, 1.0, n)
    total = np.select(
        [ce & (err == NETWORK), ce & (err == TIMEOUT), ee & (err == OOM), ee & (err == LOAD_FAILED),
         ee & (err == LMK), ee & (err == TIMEOUT)],
        [280 + rtt0 * rng.uniform(3, 8, n) + rng.uniform(0, 3000, n), CLOUD_TIMEOUT_MS, e_ttft * frac,
         rng.uniform(300, 1500, n), e_ttft + frac * e_decode, EDGE_TIMEOUT_MS], total)
    no_token = ce | (ee & np.isin(err, [OOM, LOAD_FAILED]))
    ttft = np.where(no_token, np.nan, np.minimum(ttft, total))
    output = np.where(no_token, 0, np.where(ee & (err == LMK), np.floor(output * frac), output))
    cold = cold & ~(ee & (err == LOAD_FAILED))

    # memory (edge routes only)
    resident = m.resident_mb * rng.normal(1, 0.03, n)
    activations = m.activation_mb * rng.normal(1, 0.05, n).clip(0.7)
    resident, activations = resident * memory_factor, activations * memory_factor
    peak = resident + activations + m.kv_mb_per_token * (prompt + output)

    # heat
    temp_start = rng.normal(34, 2.5, n).clip(20, 45)
    rise_edge = m.thermal_max_c * (1 - np.exp(-compute_s / 30)) * _lognormal(rng, 1, 0.2, n)
    rise = np.where(cloud, 0.1 + 0.05 * net_ms / 1000, rise_edge) + rng.normal(0, 0.15, n)
    temp_end = (temp_start + rise).clip(-20, 90)
    throttled = rng.random(n) < 0.01 + 0.5 / (1 + np.exp(-(temp_end - 43) / 1.2))
    no_temp = rng.random(n) < 0.005

    npu = pa.array(dev["npu"][d], pa.bool_(), mask=dev["npu_null"][d])
    # what an SDK logs: 0.1 ms, 0.1 MB, 0.1 C, whole percent (rounding keeps ttft <= total, resident <= peak)
    ttft, total, cold_ms, resident, peak, temp_start, temp_end = (
        np.round(x, 1) for x in (ttft, total, cold_ms, resident, peak, temp_start, temp_end))
    return {
        "model_id": _strings((m.model_id,), np.where(cloud, -1, 0)),
        "task": _strings(TASKS, task), "route": _strings(ROUTES, route),
        "device_id": dev["id"].take(pa.array(d)), "device_tier": _strings(TIERS, tier),
        "mem_class_gb": dev["mem"][d], "soc": _strings(ALL_SOCS, dev["soc"][d]),
        "os_version": _strings(ANDROID + IOS, dev["os"][d]), "npu_ready": npu,
        "network_type": _strings(NETWORKS, net), "rtt_ms": rtt,
        "prompt_tokens": prompt.astype(np.int32), "output_tokens": output.astype(np.int32),
        "ttft_ms": ttft, "total_ms": total, "streamed": rng.random(n) < np.where(task == 1, 0.05, 0.92),
        "cold_start_ms": np.where(cold, cold_ms, np.nan),
        "resident_mem_mb": np.where(edge, resident, np.nan), "peak_mem_mb": np.where(edge, peak, np.nan),
        "temp_start_c": np.where(no_temp, np.nan, temp_start),
        "temp_end_c": np.where(no_temp, np.nan, temp_end),
        "throttled": pa.array(throttled, pa.bool_(), mask=no_temp),
        "battery_pct": np.where(rng.random(n) < 0.005, np.nan, np.round(rng.uniform(5, 100, n))),
        "outcome": _strings(OUTCOMES, np.array([OUTCOMES.index(c[0]) for c in CATEGORIES])[cat]),
        "auto_fallback": auto, "error_code": _strings(ERROR_CODES, err),
        "_arrival_days": dev["arrival"][d] if dev["arrival"] is not None else None,
        "_device": d, "_kill_hazard": hazard,
    }


def _to_table(cols: dict[str, np.ndarray | pa.Array]) -> pa.Table:
    schema = load_schema().arrow_schema()
    arrays = []
    for field in schema:
        values = cols[field.name]
        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            arrays.append(values.cast(field.type))
        elif field.name == "event_time":
            arrays.append(pa.array(values, pa.int64()).cast(field.type))
        else:
            nulls = np.isnan(values) if values.dtype.kind == "f" else None
            arrays.append(pa.array(values, field.type, mask=nulls))
    return pa.Table.from_arrays(arrays, schema=schema)


# Each kind of broken row: what it changes, given the row's current values. Every contract
# rule kind (not_null, in_set, in_range, a_le_b, not_after_ingest, forbidden_when) is in the
# first ten, so bad_rows >= 10 shows all of them.
_BAD_KINDS: tuple[Callable[[dict[str, Any], datetime], dict[str, Any]], ...] = (
    lambda r, f: {"total_ms": -abs(r["total_ms"]) - 1.0},  # in_range (and ttft_le_total when ttft is set)
    lambda r, f: {"ttft_ms": r["total_ms"] + 250.0},
    lambda r, f: {"resident_mem_mb": 900.0, "peak_mem_mb": 640.0},
    lambda r, f: {"temp_end_c": 120.0},
    lambda r, f: {"battery_pct": 140.0},
    lambda r, f: {"route": "satellite"},
    lambda r, f: {"device_tier": None},
    lambda r, f: {"event_id": None},
    lambda r, f: {"route": Route.CLOUD.value, "auto_fallback": True, "model_id": None,
                  "resident_mem_mb": None, "peak_mem_mb": None},
    lambda r, f: {"event_time": f},
    lambda r, f: {"rtt_ms": -35.0, "network_type": "wifi6"},
    lambda r, f: {"mem_class_gb": 5, "outcome": "loved"},
    lambda r, f: {"total_ms": 4_000_000.0},
    lambda r, f: {"temp_start_c": -40.0, "prompt_tokens": -3},
)


def _break_rows(table: pa.Table, rng: np.random.Generator, count: int, future: datetime) -> pa.Table:
    """Make `count` random distinct rows break one or two row rules, cycling through _BAD_KINDS."""
    idx = np.sort(rng.choice(table.num_rows, count, replace=False))
    rows = table.take(pa.array(idx)).to_pylist()
    kinds = rng.permutation(count) % len(_BAD_KINDS)
    edits = [_BAD_KINDS[kind](row, future) for row, kind in zip(rows, kinds, strict=True)]
    mask = np.zeros(table.num_rows, dtype=bool)
    mask[idx] = True
    for name in dict.fromkeys(name for edit in edits for name in edit):
        values = [edit.get(name, row[name]) for row, edit in zip(rows, edits, strict=True)]
        col = table[name].combine_chunks()
        replaced = pc.replace_with_mask(col, pa.array(mask), pa.array(values, col.type))
        table = table.set_column(table.schema.get_field_index(name), name, replaced)
    return table
