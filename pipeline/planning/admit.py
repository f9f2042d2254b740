"""`pipeline admit TASK.yaml`: should a candidate task move to the edge, before any telemetry exists?

Everything here is arithmetic on what the candidate YAML declares, checked against the thresholds of the
gate config (gates/admission.yaml, through `Config.gates_for(task)`), so the admission estimate and the
rollback gate never disagree. Sections of the assessment:

  token pre-filter     prompt + output tokens > 400 excludes the edge outright
  latency              TTFT = fixed_ms / 1000 + prompt / prefill_tps; total = TTFT + output / decode_tps,
                       for the cloud and every target tier, against the task's latency budget
  memory               weights = params x bits / 8 (embedding/lm_head params optionally at unquantized_bits)
                       KV cache = 2 x layers x kv_heads x head_dim x ctx x kv_bytes
                       resident = weights + runtime overhead; peak = resident + KV cache; as shares of the
                       smallest target tier's RAM (mem_class_gb x 2^30 bytes, as the contract's ratios)
                       against gates.resident_memory / gates.peak_memory
  thermal              energy mWh = W x s / 3600 x 1000; seconds lost = s x (1 - throttle_ratio), on the
                       slowest tier; throttled duration against gates.inference_duration (advisory)
  bandwidth            decode tok/s <= bandwidth / bytes per token (~ the weight size), per tier; says when
                       the latency budget needs a decode speed beyond that ceiling (out of physical reach)
  hard gates           peak_memory, resident_memory, inference_duration (edge total <= ceiling and streamable
                       or asynchronous), quality_loss, failure_detectability: pass / fail / unknown
  score                six factors, 0-3 points each, x2 for frequency, tokens, privacy, error cost, x1 for
                       network and iteration; >= 12 is worth moving to the edge
  route                the article's rule (see `route`); an edge route becomes cloud when an enforced hard gate
                       fails or the edge misses the latency budget on a target tier

Units: GB = 10^9 bytes, GB/s = 10^9 bytes per second, RAM classes are GiB (mem_class_gb x 2^30 bytes).
The pre-filter (400 tokens), the score threshold (12), the 6 GB memory class and the score bands are the
article's constants (below); every gate threshold comes from the config.

Candidate YAML schema (unknown keys, missing required fields and wrong types are errors naming the key):

  task: str                     required; also selects the config's task_overrides
  description: str              optional, default ""
  prompt_tokens: int >= 0       required, typical input tokens
  output_tokens: int >= 0       required, typical output tokens
  calls_per_day: number >= 0    required, per active user
  privacy: on_device_only | maskable | public                                  required
  error_cost: checkable_retryable | user_fixable | changes_conclusion          required
  network: often_weak_or_offline | occasionally_weak | stable                  required
  iteration: quarterly | monthly | weekly                                      required (weekly = weekly or faster)
  needs_tools: bool             required
  verifiable: bool              required, the output can be checked automatically (schema, rule, grammar)
  streamable: bool              optional, default false
  asynchronous: bool            optional, default false (the user does not wait for the result)
  quality_loss: number          optional, relative adoption loss vs cloud in [-1, 1]; missing -> gate unknown
  failure_detectability: number optional, share in [0, 1]; missing -> gate unknown
  latency_budget:               optional
    ttft_s: number > 0          optional, default: not checked
    total_s: number > 0         optional, default: the gate's inference_duration ceiling for the task
  model:                        required
    name: str                   optional, default ""
    params_billions: number > 0 required
    bits: int 1-32              required, weight bits (4 for INT4)
    embedding_unquantized_billions: number >= 0   optional, default 0 (params kept at unquantized_bits)
    unquantized_bits: int 1-32  optional, default 16
    layers, kv_heads, head_dim, ctx: int >= 1     required
    kv_bytes: int 1-8           optional, default 2 (fp16)
    runtime_overhead_gb: number >= 0              required
    decode_power_w: number > 0  optional, default: energy unknown
  targets:                      required, non-empty list of device tiers
    - tier: low | mid | high | flagship
      mem_class_gb: 2 | 3 | 4 | 6 | 8 | 12 | 16 | 24
      npu: bool
      fixed_ms: number >= 0
      prefill_tps: number > 0
      decode_tps: number > 0
      mem_bandwidth_gbps: number > 0   optional, default 51.2 (LPDDR5-6400, 64-bit bus)
      throttle_ratio: number (0, 1]    optional, default 0.6 (share of speed kept when throttled)
  cloud:                        optional, default the article's: fixed_ms 280, prefill_tps 2000, decode_tps 80

Why one module: every section is arithmetic on the same candidate against the same gate thresholds,
in the order the assessment prints it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pipeline.common import vocabulary
from pipeline.common.errors import ConfigError
from pipeline.common.registry import GateName
from pipeline.common.vocabulary import TIERS, Status
from pipeline.common.yamlspec import build, read_yaml, setting

if TYPE_CHECKING:
    from pipeline.common.config import Config

MAX_EDGE_TOKENS = 400
MIN_EDGE_SCORE = 12
MIN_EDGE_MEM_CLASS_GB = 6
LPDDR5_BANDWIDTH_GBPS = 51.2
DEFAULT_THROTTLE_RATIO = 0.6
GB = 1e9
GIB = 2**30

MEM_CLASSES = (2, 3, 4, 6, 8, 12, 16, 24)
PRIVACY = {"on_device_only": 3, "maskable": 1, "public": 0}
ERROR_COST = {"checkable_retryable": 3, "user_fixable": 1, "changes_conclusion": 0}
NETWORK = {"often_weak_or_offline": 3, "occasionally_weak": 1, "stable": 0}
ITERATION = {"quarterly": 3, "monthly": 1, "weekly": 0}
# (factor, weight); points per factor are 0-3
FACTORS = (("call_frequency", 2), ("token_budget", 2), ("privacy", 2), ("error_cost", 2),
           ("network", 1), ("iteration", 1))
MAX_SCORE = 3 * sum(weight for _, weight in FACTORS)


def _f(default: Any = dataclasses.MISSING, *, lo: float | None = None, hi: float | None = None,
       above: float | None = None, choices: tuple | None = None, help: str = "") -> Any:
    """A field of the candidate file (pipeline/common/yamlspec.py); no default = required, strings not blank."""
    return setting(default, lo=lo, hi=hi, above=above, choices=choices, blank=False,
                   min_items=1, help=help)


# ---------------------------------------------------------------- the candidate


@dataclass(frozen=True, kw_only=True)
class Cloud:
    fixed_ms: float = _f(280.0, lo=0, help="fixed latency per request, ms")
    prefill_tps: float = _f(2000.0, above=0, help="prompt tokens per second")
    decode_tps: float = _f(80.0, above=0, help="output tokens per second")


@dataclass(frozen=True, kw_only=True)
class Target:
    tier: str = _f(choices=TIERS, help="device tier")
    mem_class_gb: int = _f(choices=MEM_CLASSES, help="RAM class in GB")
    npu: bool = _f(help="a usable NPU path")
    fixed_ms: float = _f(lo=0, help="fixed latency per request, ms")
    prefill_tps: float = _f(above=0, help="prompt tokens per second")
    decode_tps: float = _f(above=0, help="output tokens per second")
    mem_bandwidth_gbps: float = _f(LPDDR5_BANDWIDTH_GBPS, above=0, help="memory bandwidth, GB/s")
    throttle_ratio: float = _f(DEFAULT_THROTTLE_RATIO, above=0, hi=1, help="share of speed kept when throttled")


@dataclass(frozen=True, kw_only=True)
class Model:
    name: str = _f("", help="model build")
    params_billions: float = _f(above=0, help="parameters, billions")
    bits: int = _f(lo=1, hi=32, help="weight bits")
    embedding_unquantized_billions: float = _f(0.0, lo=0, help="embedding + lm_head params kept unquantized")
    unquantized_bits: int = _f(16, lo=1, hi=32, help="bits of the unquantized params")
    layers: int = _f(lo=1, help="transformer layers")
    kv_heads: int = _f(lo=1, help="KV heads")
    head_dim: int = _f(lo=1, help="head dimension")
    ctx: int = _f(lo=1, help="context length in tokens")
    kv_bytes: int = _f(2, lo=1, hi=8, help="bytes per KV element")
    runtime_overhead_gb: float = _f(lo=0, help="runtime memory besides weights and KV cache, GB")
    decode_power_w: float | None = _f(None, above=0, help="SoC power while decoding, W")


@dataclass(frozen=True, kw_only=True)
class LatencyBudget:
    ttft_s: float | None = _f(None, above=0, help="time to first token, s")
    total_s: float | None = _f(None, above=0, help="total time, s (default: the gate's ceiling)")


@dataclass(frozen=True, kw_only=True)
class Candidate:
    task: str = _f(help="task name")
    description: str = _f("", help="free text")
    prompt_tokens: int = _f(lo=0, help="typical input tokens")
    output_tokens: int = _f(lo=0, help="typical output tokens")
    calls_per_day: float = _f(lo=0, help="calls per active user and day")
    privacy: str = _f(choices=tuple(PRIVACY), help="privacy class")
    error_cost: str = _f(choices=tuple(ERROR_COST), help="cost of a wrong answer")
    network: str = _f(choices=tuple(NETWORK), help="network environment")
    iteration: str = _f(choices=tuple(ITERATION), help="how often the prompt/model changes")
    needs_tools: bool = _f(help="needs tool calls")
    verifiable: bool = _f(help="output checkable automatically")
    streamable: bool = _f(False, help="result can be streamed")
    asynchronous: bool = _f(False, help="the user does not wait for the result")
    quality_loss: float | None = _f(None, lo=-1, hi=1, help="relative adoption loss vs cloud")
    failure_detectability: float | None = _f(None, lo=0, hi=1, help="share of failures caught automatically")
    latency_budget: LatencyBudget = _f(LatencyBudget())
    model: Model = _f(help="the on-device model")
    targets: tuple[Target, ...] = _f(help="a non-empty list of device tiers")
    cloud: Cloud = _f(Cloud())

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


def load_candidate(path: Path | str) -> Candidate:
    """Read and check a candidate YAML; every problem is a one-line ConfigError naming the file and key."""
    path = Path(path)
    raw = read_yaml(path, "candidate")
    try:
        candidate = build(Candidate, raw)
        model = candidate.model
        if model.embedding_unquantized_billions > model.params_billions:
            raise ValueError("model.embedding_unquantized_billions must not exceed model.params_billions, "
                             f"got {model.embedding_unquantized_billions} > {model.params_billions}")
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return candidate


# ---------------------------------------------------------------- pure computations


def round_half_up(x: float, digits: int) -> Decimal:
    """Round as people do (0.355 -> 0.36), not as binary floats happen to (round(0.355, 2) == 0.35)."""
    return Decimal(f"{x:.9f}").quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)


def fmt_seconds(s: float) -> str:
    """The article's rounding: two decimals below 10 s, one from 10 s (0.30, 2.05, 18.4)."""
    return str(round_half_up(s, 2 if round_half_up(s, 2) < 10 else 1))


class Latency(NamedTuple):
    ttft_s: float
    total_s: float


def ttft_s(fixed_ms: float, prompt_tokens: int, prefill_tps: float) -> float:
    return fixed_ms / 1000 + prompt_tokens / prefill_tps


def total_s(fixed_ms: float, prompt_tokens: int, output_tokens: int, prefill_tps: float, decode_tps: float) -> float:
    return ttft_s(fixed_ms, prompt_tokens, prefill_tps) + output_tokens / decode_tps


def latency(device: Cloud | Target, prompt_tokens: int, output_tokens: int) -> Latency:
    first = ttft_s(device.fixed_ms, prompt_tokens, device.prefill_tps)
    return Latency(first, first + output_tokens / device.decode_tps)


def weight_bytes(params_billions: float, bits: int, embedding_unquantized_billions: float = 0.0,
                 unquantized_bits: int = 16) -> float:
    quantized = params_billions - embedding_unquantized_billions
    return (quantized * bits + embedding_unquantized_billions * unquantized_bits) / 8 * GB


def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, ctx: int, kv_bytes: int = 2) -> int:
    """K and V, for every layer, KV head, head dimension and context position."""
    return 2 * layers * kv_heads * head_dim * ctx * kv_bytes


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: float
    kv_cache_bytes: float
    runtime_overhead_bytes: float

    @property
    def resident_bytes(self) -> float:
        """Between requests: the loaded weights and the runtime."""
        return self.weights_bytes + self.runtime_overhead_bytes

    @property
    def peak_bytes(self) -> float:
        """During a request: resident plus the full KV cache."""
        return self.resident_bytes + self.kv_cache_bytes


def memory_estimate(model: Model) -> MemoryEstimate:
    return MemoryEstimate(
        weight_bytes(model.params_billions, model.bits, model.embedding_unquantized_billions, model.unquantized_bits),
        kv_cache_bytes(model.layers, model.kv_heads, model.head_dim, model.ctx, model.kv_bytes),
        model.runtime_overhead_gb * GB,
    )


def ram_share(nbytes: float, mem_class_gb: int) -> float:
    """Share of a RAM class, as the contract's peak_mem_ratio = peak_mem_mb / (mem_class_gb * 1024)."""
    return nbytes / (mem_class_gb * GIB)


def energy_mwh(power_w: float, seconds: float) -> float:
    return power_w * seconds / 3600 * 1000


def throttle_loss_s(seconds: float, throttle_ratio: float) -> float:
    """Seconds of work lost over `seconds` when throttling keeps `throttle_ratio` of the speed."""
    return seconds * (1 - throttle_ratio)


@dataclass(frozen=True)
class ThermalDebt:
    power_w: float | None
    seconds: float
    throttle_ratio: float
    energy_mwh: float | None
    lost_s: float

    @property
    def throttled_total_s(self) -> float:
        return self.seconds + self.lost_s


def thermal_debt(power_w: float | None, seconds: float, throttle_ratio: float) -> ThermalDebt:
    energy = None if power_w is None else energy_mwh(power_w, seconds)
    return ThermalDebt(power_w, seconds, throttle_ratio, energy, throttle_loss_s(seconds, throttle_ratio))


def decode_ceiling_tps(bandwidth_gbps: float, bytes_per_token: float) -> float:
    """Decoding reads every weight once per token, so tokens/s <= bandwidth / bytes per token."""
    return bandwidth_gbps * GB / bytes_per_token


def required_decode_tps(output_tokens: int, budget_total_s: float, ttft: float) -> float:
    """Decode speed needed to finish within the budget; inf when the first token alone misses it."""
    if output_tokens == 0:
        return 0.0
    left = budget_total_s - ttft
    return output_tokens / left if left > 0 else math.inf


def frequency_points(calls_per_day: float) -> int:
    return 3 if calls_per_day > 20 else 1 if calls_per_day >= 2 else 0


def token_points(total_tokens: int) -> int:
    return 3 if total_tokens < 100 else 1 if total_tokens <= MAX_EDGE_TOKENS else 0


class Factor(NamedTuple):
    name: str
    value: Any
    points: int
    weight: int


@dataclass(frozen=True)
class Score:
    factors: tuple[Factor, ...]

    @property
    def total(self) -> int:
        return sum(f.points * f.weight for f in self.factors)

    @property
    def worth_moving(self) -> bool:
        return self.total >= MIN_EDGE_SCORE


def score(calls_per_day: float, total_tokens: int, privacy: str, error_cost: str, network: str,
          iteration: str) -> Score:
    points = {
        "call_frequency": (calls_per_day, frequency_points(calls_per_day)),
        "token_budget": (total_tokens, token_points(total_tokens)),
        "privacy": (privacy, PRIVACY[privacy]),
        "error_cost": (error_cost, ERROR_COST[error_cost]),
        "network": (network, NETWORK[network]),
        "iteration": (iteration, ITERATION[iteration]),
    }
    return Score(tuple(Factor(name, *points[name], weight) for name, weight in FACTORS))


class RouteChoice(NamedTuple):
    route: str
    reason: str


def route(total_tokens: int, needs_tools: bool, mem_class_gb: int, npu: bool, privacy: str, network: str,
          verifiable: bool) -> RouteChoice:
    """The article's rule, first match wins."""
    if total_tokens > MAX_EDGE_TOKENS:
        return RouteChoice(vocabulary.Route.CLOUD, f"{total_tokens} tokens > {MAX_EDGE_TOKENS} (token pre-filter)")
    if needs_tools:
        return RouteChoice(vocabulary.Route.CLOUD, "needs tools")
    if mem_class_gb < MIN_EDGE_MEM_CLASS_GB:
        return RouteChoice(vocabulary.Route.CLOUD, f"memory class {mem_class_gb} GB < {MIN_EDGE_MEM_CLASS_GB} GB")
    if not npu:
        return RouteChoice(vocabulary.Route.CLOUD, "no NPU")
    if privacy == "on_device_only":
        return RouteChoice(vocabulary.Route.EDGE_WITH_CLOUD_CHECK, "strict privacy: the text must stay on the device")
    if network == "often_weak_or_offline":
        return RouteChoice(vocabulary.Route.EDGE_WITH_CLOUD_CHECK, "often offline or on a weak network")
    if verifiable:
        return RouteChoice(vocabulary.Route.EDGE, "output is automatically verifiable")
    return RouteChoice(vocabulary.Route.CLOUD, "output is not automatically verifiable")


# ---------------------------------------------------------------- the assessment


@dataclass(frozen=True)
class AdmissionCheck:
    gate: str
    verdict: str  # pass | fail | unknown
    mode: str  # the config's: enforce | observe
    value: float | None
    threshold: float
    detail: str


def _verdict(ok: bool | None) -> str:
    return "unknown" if ok is None else Status.PASS if ok else Status.FAIL


@dataclass(frozen=True)
class TierAssessment:
    target: Target
    latency: Latency
    within_budget: bool
    ceiling_tps: float
    required_tps: float

    @property
    def reachable(self) -> bool:
        return self.required_tps <= self.ceiling_tps


def _reach(t: TierAssessment) -> str:
    if math.isinf(t.required_tps):
        return "the first token alone misses the budget (prefill-bound)"
    need = f"budget needs >= {round_half_up(t.required_tps, 1)} tok/s"
    if not t.reachable:
        return f"{need}: OUT OF PHYSICAL REACH"
    if t.required_tps > t.target.decode_tps:
        return f"{need}: under the ceiling, above the declared speed"
    return f"{need}: reachable"


def _num(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or not math.isfinite(x) else float(round_half_up(x, digits))


def _show_value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _pct(x: float) -> str:
    return f"{round_half_up(100 * x, 1)} %"


def _gb(nbytes: float) -> str:
    return f"{round_half_up(nbytes / GB, 3)} GB"


@dataclass(frozen=True)
class AdmitResult:
    candidate: Candidate
    source: str
    config_source: str
    config_digest: str
    cloud: Latency
    tiers: tuple[TierAssessment, ...]
    budget_ttft_s: float | None
    budget_total_s: float
    memory: MemoryEstimate
    memory_tier: Target
    thermal: ThermalDebt
    thermal_tier: Target
    ceiling_s: float
    daily_edge_s: float
    daily_edge_cap_s: float
    gates: tuple[AdmissionCheck, ...]
    score: Score
    rule: RouteChoice
    route: RouteChoice
    notes: tuple[str, ...]

    @property
    def prefilter_passed(self) -> bool:
        return self.candidate.total_tokens <= MAX_EDGE_TOKENS

    @property
    def latency_ok(self) -> bool:
        return all(t.within_budget for t in self.tiers)

    def gate(self, name: str) -> AdmissionCheck:
        return next(g for g in self.gates if g.gate == name)

    def to_dict(self) -> dict[str, Any]:
        c, m = self.candidate, self.memory
        ram = self.memory_tier.mem_class_gb
        return {
            "task": c.task,
            "source": self.source,
            "config": {"source": self.config_source, "digest": self.config_digest},
            "prefilter": {"prompt_tokens": c.prompt_tokens, "output_tokens": c.output_tokens,
                          "total_tokens": c.total_tokens, "max_tokens": MAX_EDGE_TOKENS,
                          "passed": self.prefilter_passed},
            "latency": {
                "budget": {"ttft_s": self.budget_ttft_s, "total_s": self.budget_total_s, "passed": self.latency_ok},
                "cloud": {"ttft_s": _num(self.cloud.ttft_s), "total_s": _num(self.cloud.total_s)},
                "edge": [{"tier": t.target.tier, "mem_class_gb": t.target.mem_class_gb,
                          "ttft_s": _num(t.latency.ttft_s), "total_s": _num(t.latency.total_s),
                          "within_budget": t.within_budget} for t in self.tiers],
            },
            "memory": {"tier": self.memory_tier.tier, "mem_class_gb": ram,
                       "weights_gb": _num(m.weights_bytes / GB), "kv_cache_gb": _num(m.kv_cache_bytes / GB),
                       "runtime_overhead_gb": _num(m.runtime_overhead_bytes / GB),
                       "resident_gb": _num(m.resident_bytes / GB), "peak_gb": _num(m.peak_bytes / GB),
                       "resident_ratio": _num(ram_share(m.resident_bytes, ram), 4),
                       "peak_ratio": _num(ram_share(m.peak_bytes, ram), 4)},
            "thermal": {"tier": self.thermal_tier.tier, "power_w": self.thermal.power_w,
                        "seconds": _num(self.thermal.seconds), "throttle_ratio": self.thermal.throttle_ratio,
                        "energy_mwh": _num(self.thermal.energy_mwh, 1), "lost_s": _num(self.thermal.lost_s, 1),
                        "throttled_total_s": _num(self.thermal.throttled_total_s),
                        "ceiling_s": self.ceiling_s,
                        "within_ceiling": self.thermal.throttled_total_s <= self.ceiling_s,
                        "daily_edge_s": _num(self.daily_edge_s, 1), "daily_edge_cap_s": self.daily_edge_cap_s},
            "bandwidth": [{"tier": t.target.tier, "bandwidth_gbps": t.target.mem_bandwidth_gbps,
                           "bytes_per_token_gb": _num(m.weights_bytes / GB), "ceiling_tps": _num(t.ceiling_tps, 1),
                           "declared_decode_tps": t.target.decode_tps,
                           "declared_within_ceiling": t.target.decode_tps <= t.ceiling_tps,
                           "required_decode_tps": _num(t.required_tps, 1), "budget_physically_reachable": t.reachable}
                          for t in self.tiers],
            "hard_gates": [{"gate": g.gate, "verdict": g.verdict, "mode": g.mode, "value": _num(g.value, 4),
                            "threshold": g.threshold, "detail": g.detail} for g in self.gates],
            "score": {"total": self.score.total, "max": MAX_SCORE, "threshold": MIN_EDGE_SCORE,
                      "worth_moving": self.score.worth_moving,
                      "factors": [{"factor": f.name, "value": f.value, "points": f.points, "weight": f.weight,
                                   "weighted": f.points * f.weight} for f in self.score.factors]},
            "route": {"route": self.route.route, "reason": self.route.reason, "rule_route": self.rule.route,
                      "rule_reason": self.rule.reason},
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        c, m = self.candidate, self.memory
        ram = self.memory_tier.mem_class_gb
        out = [f"admit {c.task}: {self.source} (thresholds: {self.config_source} {self.config_digest})".rstrip()]
        verdict = "passes" if self.prefilter_passed else "edge excluded"
        sign = "<=" if self.prefilter_passed else ">"
        out += ["", f"Token pre-filter: {c.prompt_tokens} + {c.output_tokens} = {c.total_tokens} tokens "
                    f"{sign} {MAX_EDGE_TOKENS}: {verdict}"]
        budget = f"total <= {fmt_seconds(self.budget_total_s)} s"
        if self.budget_ttft_s is not None:
            budget = f"TTFT <= {fmt_seconds(self.budget_ttft_s)} s, {budget}"
        out += ["", f"Latency, typical request (budget: {budget})", f"  {'':<22}{'TTFT':>8}{'total':>9}",
                f"  {'cloud':<22}{fmt_seconds(self.cloud.ttft_s):>7}s{fmt_seconds(self.cloud.total_s):>8}s"]
        for t in self.tiers:
            name = f"edge {t.target.tier} ({t.target.mem_class_gb} GB)"
            ok = "within budget" if t.within_budget else "OVER BUDGET"
            out.append(f"  {name:<22}{fmt_seconds(t.latency.ttft_s):>7}s{fmt_seconds(t.latency.total_s):>8}s  {ok}")
        peak, resident = self.gate(GateName.PEAK_MEMORY), self.gate(GateName.RESIDENT_MEMORY)
        out += ["", f"Memory on the smallest tier ({self.memory_tier.tier}, {ram} GB RAM)",
                f"  weights {_gb(m.weights_bytes)} + KV cache {_gb(m.kv_cache_bytes)} "
                f"+ runtime {_gb(m.runtime_overhead_bytes)}",
                f"  resident {_gb(m.resident_bytes)} = {_pct(ram_share(m.resident_bytes, ram))} of RAM "
                f"(max {_pct(resident.threshold)}): {resident.verdict}",
                f"  peak     {_gb(m.peak_bytes)} = {_pct(ram_share(m.peak_bytes, ram))} of RAM "
                f"(max {_pct(peak.threshold)}): {peak.verdict}"]
        th = self.thermal
        energy = "unknown (no model.decode_power_w)" if th.energy_mwh is None else \
            f"{round_half_up(th.energy_mwh, 1)} mWh ({th.power_w:g} W x {fmt_seconds(th.seconds)} s)"
        within = "within" if th.throttled_total_s <= self.ceiling_s else "OVER"
        out += ["", f"Thermal debt per call on the slowest tier ({self.thermal_tier.tier})",
                f"  energy {energy}",
                f"  throttled at {th.throttle_ratio:g}: {round_half_up(th.lost_s, 1)} s lost -> "
                f"{fmt_seconds(th.throttled_total_s)} s, {within} the {fmt_seconds(self.ceiling_s)} s ceiling",
                f"  per day: {c.calls_per_day:g} calls x {fmt_seconds(th.seconds)} s = "
                f"{round_half_up(self.daily_edge_s, 1)} s of edge inference (cap {self.daily_edge_cap_s:g} s)"]
        out += ["", f"Bandwidth ceiling on decode (bytes per token ~ weights {_gb(m.weights_bytes)})"]
        for t in self.tiers:
            declared = "ok" if t.target.decode_tps <= t.ceiling_tps else "ABOVE THE CEILING (implausible)"
            out.append(f"  {t.target.tier}: {t.target.mem_bandwidth_gbps:g} GB/s -> <= "
                       f"{round_half_up(t.ceiling_tps, 1)} tok/s; declared {t.target.decode_tps:g} tok/s {declared}; "
                       f"{_reach(t)}")
        out += ["", "Hard gates"]
        out += [f"  {g.gate:<22} {g.verdict:<8} {g.detail}" + ("" if g.mode == "enforce" else " (observe only)")
                for g in self.gates]
        s = self.score
        worth = "worth moving to the edge" if s.worth_moving else "not worth moving to the edge"
        out += ["", f"Score {s.total} / {MAX_SCORE} (>= {MIN_EDGE_SCORE}: {worth})"]
        out += [f"  {f.name:<16} {_show_value(f.value):<24} {f.points} x{f.weight} = {f.points * f.weight}"
                for f in s.factors]
        out += ["", f"Route: {self.route.route}: {self.route.reason}"]
        out += [f"  note: {n}" for n in self.notes]
        return "\n".join(out)


def assess(candidate: Candidate, config: Config, source: str = "") -> AdmitResult:
    c = candidate
    gates = config.gates_for(c.task)
    ceiling_s = gates.inference_duration.max_p95_ms / 1000
    budget_total = c.latency_budget.total_s if c.latency_budget.total_s is not None else ceiling_s
    budget_ttft = c.latency_budget.ttft_s
    memory = memory_estimate(c.model)

    tiers = []
    for t in c.targets:
        lat = latency(t, c.prompt_tokens, c.output_tokens)
        ok = lat.total_s <= budget_total and (budget_ttft is None or lat.ttft_s <= budget_ttft)
        tiers.append(TierAssessment(t, lat, ok, decode_ceiling_tps(t.mem_bandwidth_gbps, memory.weights_bytes),
                                    required_decode_tps(c.output_tokens, budget_total, lat.ttft_s)))
    smallest = min(c.targets, key=lambda t: t.mem_class_gb)
    slowest = max(tiers, key=lambda t: t.latency.total_s)
    thermal = thermal_debt(c.model.decode_power_w, slowest.latency.total_s, slowest.target.throttle_ratio)

    ram = smallest.mem_class_gb
    peak, resident = ram_share(memory.peak_bytes, ram), ram_share(memory.resident_bytes, ram)
    worst_ms = slowest.latency.total_s * 1000
    delivery = c.streamable or c.asynchronous
    checks = (
        AdmissionCheck(GateName.PEAK_MEMORY, _verdict(peak <= gates.peak_memory.max_p95_ratio), gates.peak_memory.mode,
                  peak, gates.peak_memory.max_p95_ratio,
                  f"{_pct(peak)} of {ram} GB (max {_pct(gates.peak_memory.max_p95_ratio)})"),
        AdmissionCheck(GateName.RESIDENT_MEMORY, _verdict(resident <= gates.resident_memory.max_p95_ratio),
                  gates.resident_memory.mode, resident, gates.resident_memory.max_p95_ratio,
                  f"{_pct(resident)} of {ram} GB (max {_pct(gates.resident_memory.max_p95_ratio)})"),
        AdmissionCheck(GateName.INFERENCE_DURATION,
                       _verdict(worst_ms <= gates.inference_duration.max_p95_ms and delivery),
                  gates.inference_duration.mode, worst_ms, gates.inference_duration.max_p95_ms,
                  f"{fmt_seconds(slowest.latency.total_s)} s on {slowest.target.tier} "
                  f"(max {fmt_seconds(ceiling_s)} s), "
                  + ("streamable" if c.streamable else "asynchronous" if c.asynchronous
                     else "neither streamable nor asynchronous")),
        AdmissionCheck(GateName.QUALITY_LOSS,
                  _verdict(None if c.quality_loss is None else c.quality_loss <= gates.quality_loss.max_relative_loss),
                  gates.quality_loss.mode, c.quality_loss, gates.quality_loss.max_relative_loss,
                  ("not declared" if c.quality_loss is None else _pct(c.quality_loss))
                  + f" (max {_pct(gates.quality_loss.max_relative_loss)})"),
        AdmissionCheck(GateName.FAILURE_DETECTABILITY,
                  _verdict(None if c.failure_detectability is None
                           else c.failure_detectability >= gates.failure_detectability.min_share),
                  gates.failure_detectability.mode, c.failure_detectability, gates.failure_detectability.min_share,
                  ("not declared" if c.failure_detectability is None else _pct(c.failure_detectability))
                  + f" (min {_pct(gates.failure_detectability.min_share)})"),
    )

    npu = all(t.npu for t in c.targets)
    rule = route(c.total_tokens, c.needs_tools, ram, npu, c.privacy, c.network, c.verifiable)
    blockers = [g.gate for g in checks if g.verdict == Status.FAIL and g.mode == "enforce"]
    if not all(t.within_budget for t in tiers):
        blockers.insert(0, "latency budget")
    final = rule
    if rule.route != vocabulary.Route.CLOUD and blockers:
        final = RouteChoice(vocabulary.Route.CLOUD,
                            f"the rule says {rule.route} ({rule.reason}), but {', '.join(blockers)} failed")

    sc = score(c.calls_per_day, c.total_tokens, c.privacy, c.error_cost, c.network, c.iteration)
    notes = []
    if rule.route == vocabulary.Route.CLOUD and blockers:
        notes.append(f"on the edge it would also fail: {', '.join(blockers)}")
    if final.route != vocabulary.Route.CLOUD:
        if not sc.worth_moving:
            notes.append(f"score {sc.total} < {MIN_EDGE_SCORE}: allowed on the edge but hardly worth the move")
        unknown = [g.gate for g in checks if g.verdict == "unknown"]
        if unknown:
            notes.append(f"not declared, measure in a hold-back before rollout: {', '.join(unknown)}")
        if thermal.throttled_total_s > ceiling_s:
            notes.append(f"throttled, the slowest tier takes {fmt_seconds(thermal.throttled_total_s)} s "
                         f"(> {fmt_seconds(ceiling_s)} s): inference_duration p95 is at risk on hot devices")
    for t in tiers:
        if t.target.decode_tps > t.ceiling_tps:
            notes.append(f"{t.target.tier}: declared decode {t.target.decode_tps:g} tok/s exceeds the bandwidth "
                         f"ceiling {round_half_up(t.ceiling_tps, 1)} tok/s; check the measurement")
        if math.isinf(t.required_tps):
            notes.append(f"{t.target.tier}: the first token alone misses the {fmt_seconds(budget_total)} s budget")
        elif not t.reachable:
            notes.append(f"{t.target.tier}: the {fmt_seconds(budget_total)} s budget needs "
                         f"{round_half_up(t.required_tps, 1)} tok/s, beyond the memory-bandwidth ceiling of "
                         f"{round_half_up(t.ceiling_tps, 1)} tok/s: out of physical reach")
    daily = c.calls_per_day * slowest.latency.total_s
    if daily > config.network.daily_edge_seconds_cap:
        notes.append(f"{round_half_up(daily, 1)} s of edge inference per device-day exceeds the "
                     f"{config.network.daily_edge_seconds_cap:g} s cap (gate daily_edge_seconds)")
    return AdmitResult(c, source, config.source, config.digest, latency(c.cloud, c.prompt_tokens, c.output_tokens),
                       tuple(tiers), budget_ttft, budget_total, memory, smallest, thermal, slowest.target, ceiling_s,
                       daily, config.network.daily_edge_seconds_cap, checks, sc, rule, final, tuple(notes))


def admit(path: Path, config: Config) -> AdmitResult:
    """Assess the candidate at `path` against `config`'s gate thresholds (ConfigError on a bad candidate)."""
    return assess(load_candidate(path), config, str(path))
