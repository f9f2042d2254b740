"""`pipeline admit`: the article's numbers, the routing rule, the shipped candidates, bad YAMLs, config thresholds."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from pipeline.common.config import Config, load_config
from pipeline.common.errors import ConfigError
from pipeline.planning.admit import (
    GB,
    LPDDR5_BANDWIDTH_GBPS,
    Cloud,
    Target,
    admit,
    assess,
    decode_ceiling_tps,
    energy_mwh,
    fmt_seconds,
    frequency_points,
    kv_cache_bytes,
    latency,
    load_candidate,
    memory_estimate,
    ram_share,
    required_decode_tps,
    round_half_up,
    route,
    score,
    thermal_debt,
    token_points,
    total_s,
    ttft_s,
    weight_bytes,
)

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = ROOT / "gates" / "candidates"
# the article's mid-range phone running a 1.8B INT4 model
PHONE = Target(tier="mid", mem_class_gb=6, npu=True, fixed_ms=50, prefill_tps=60, decode_tps=15)


@pytest.fixture(scope="module")
def config() -> Config:
    return load_config()


# ---------------------------------------------------------------- the article's numbers


@pytest.mark.parametrize("prompt, output, cloud_ttft, cloud_total, edge_ttft, edge_total", [
    (40, 20, "0.30", "0.55", "0.72", "2.05"),
    (150, 60, "0.36", "1.11", "2.55", "6.55"),
    (300, 200, "0.43", "2.93", "5.05", "18.4"),
])
def test_latency_table(prompt, output, cloud_ttft, cloud_total, edge_ttft, edge_total):
    cloud, edge = latency(Cloud(), prompt, output), latency(PHONE, prompt, output)
    assert [fmt_seconds(x) for x in (*cloud, *edge)] == [cloud_ttft, cloud_total, edge_ttft, edge_total]


def test_latency_formulas():
    assert ttft_s(280, 40, 2000) == pytest.approx(0.30)
    assert total_s(50, 40, 20, 60, 15) == pytest.approx(0.05 + 40 / 60 + 20 / 15)
    assert Cloud() == Cloud(fixed_ms=280, prefill_tps=2000, decode_tps=80)


def test_rounding_is_half_up_not_binary():
    assert round_half_up(0.28 + 150 / 2000, 2) == Decimal("0.36")  # 0.355 rounds up, as in the article
    assert round_half_up(0.355, 2) == Decimal("0.36")  # where round(0.355, 2) == 0.35
    assert round_half_up(1.105, 2) == Decimal("1.11")
    assert fmt_seconds(9.999) == "10.0"
    assert fmt_seconds(18.3833) == "18.4"


def test_kv_cache_of_the_article():
    kv = kv_cache_bytes(layers=24, kv_heads=8, head_dim=128, ctx=2048, kv_bytes=2)
    assert kv == 2 * 24 * 8 * 128 * 2048 * 2 == 201_326_592
    assert str(round_half_up(kv / GB, 3)) == "0.201"


def test_weights_and_memory_estimate():
    assert weight_bytes(1.8, 4) == pytest.approx(0.9 * GB)
    # 0.2B of embedding/lm_head kept at fp16: 1.6B x 0.5 B + 0.2B x 2 B
    assert weight_bytes(1.8, 4, 0.2, 16) == pytest.approx(1.2 * GB)
    model = load_candidate(CANDIDATES / "intent.yaml").model
    m = memory_estimate(model)
    assert m.resident_bytes == pytest.approx(1.5 * GB)
    assert m.peak_bytes == pytest.approx(1.5 * GB + 201_326_592)
    assert ram_share(8 * 2**30 * 0.25, 8) == pytest.approx(0.25)


def test_thermal_debt_of_the_article():
    debt = thermal_debt(5, 30, 0.6)
    assert str(round_half_up(debt.energy_mwh, 1)) == "41.7"
    assert str(round_half_up(debt.lost_s, 1)) == "12.0"
    assert debt.throttled_total_s == pytest.approx(42.0)
    assert energy_mwh(5, 30) == pytest.approx(41.666, abs=1e-3)
    assert thermal_debt(None, 30, 0.6).energy_mwh is None


@pytest.mark.parametrize("bandwidth_gbps", [LPDDR5_BANDWIDTH_GBPS, 68.3])
@pytest.mark.parametrize("weights_gb, lo, hi", [(2, 25, 40), (4, 10, 18), (7, 7, 10)])  # 3B, 7B, 13B INT4
def test_bandwidth_ceiling_lands_in_the_guides_table(bandwidth_gbps, weights_gb, lo, hi):
    assert lo <= decode_ceiling_tps(bandwidth_gbps, weights_gb * GB) <= hi


def test_required_decode_speed():
    assert required_decode_tps(200, 10.0, 5.0) == pytest.approx(40.0)
    assert required_decode_tps(200, 5.0, 5.05) == float("inf")
    assert required_decode_tps(0, 1.0, 5.0) == 0.0


# ---------------------------------------------------------------- score and route


@pytest.mark.parametrize("calls, points", [(21, 3), (20.5, 3), (20, 1), (2, 1), (1.9, 0), (0, 0)])
def test_frequency_bands(calls, points):
    assert frequency_points(calls) == points


@pytest.mark.parametrize("tokens, points", [(0, 3), (99, 3), (100, 1), (400, 1), (401, 0)])
def test_token_bands(tokens, points):
    assert token_points(tokens) == points


def test_score_weights_and_threshold():
    best = score(50, 48, "on_device_only", "checkable_retryable", "often_weak_or_offline", "quarterly")
    assert best.total == 30 and best.worth_moving
    worst = score(1, 500, "public", "changes_conclusion", "stable", "weekly")
    assert worst.total == 0 and not worst.worth_moving
    # exactly 12: frequency 3 x2 + tokens 3 x2
    twelve = score(30, 50, "public", "changes_conclusion", "stable", "weekly")
    assert twelve.total == 12 and twelve.worth_moving
    assert score(30, 150, "maskable", "user_fixable", "occasionally_weak", "weekly").total == 13  # 6+2+2+2+1
    ten = score(10, 150, "maskable", "user_fixable", "occasionally_weak", "monthly")  # 2+2+2+2+1+1
    assert ten.total == 10 and not ten.worth_moving
    weights = {f.name: f.weight for f in best.factors}
    assert weights == {"call_frequency": 2, "token_budget": 2, "privacy": 2, "error_cost": 2, "network": 1,
                       "iteration": 1}
    assert [f.points for f in score(10, 150, "maskable", "user_fixable", "occasionally_weak", "monthly").factors] \
        == [1, 1, 1, 1, 1, 1]


BASE = dict(total_tokens=100, needs_tools=False, mem_class_gb=8, npu=True, privacy="maskable",
            network="stable", verifiable=True)


@pytest.mark.parametrize("change, expected", [
    ({}, "edge"),
    ({"verifiable": False}, "cloud"),
    ({"total_tokens": 401}, "cloud"),
    ({"total_tokens": 400}, "edge"),
    ({"total_tokens": 401, "privacy": "on_device_only"}, "cloud"),  # the pre-filter comes first
    ({"needs_tools": True}, "cloud"),
    ({"needs_tools": True, "network": "often_weak_or_offline"}, "cloud"),
    ({"mem_class_gb": 4}, "cloud"),
    ({"mem_class_gb": 6}, "edge"),
    ({"mem_class_gb": 4, "privacy": "on_device_only"}, "cloud"),
    ({"npu": False}, "cloud"),
    ({"npu": False, "network": "often_weak_or_offline"}, "cloud"),
    ({"privacy": "on_device_only"}, "edge_with_cloud_check"),
    ({"privacy": "on_device_only", "verifiable": False}, "edge_with_cloud_check"),
    ({"network": "often_weak_or_offline"}, "edge_with_cloud_check"),
    ({"network": "often_weak_or_offline", "verifiable": False}, "edge_with_cloud_check"),
    ({"network": "occasionally_weak"}, "edge"),
    ({"privacy": "public", "network": "occasionally_weak", "verifiable": False}, "cloud"),
])
def test_routing_rule(change, expected):
    decision = route(**{**BASE, **change})
    assert decision.route == expected
    assert decision.reason


# ---------------------------------------------------------------- shipped candidates


@pytest.mark.parametrize("name, expected", [
    ("rewrite", "cloud"),
    ("intent", "edge"),
    ("redaction", "edge_with_cloud_check"),
    ("summary", "cloud"),
])
def test_shipped_candidates_route(config, name, expected):
    result = admit(CANDIDATES / f"{name}.yaml", config)
    assert result.route.route == expected
    json.dumps(result.to_dict(), allow_nan=False)  # JSON-safe
    text = str(result)
    for section in ("Token pre-filter", "Latency", "Memory", "Thermal", "Bandwidth", "Hard gates", "Score", "Route"):
        assert section in text


def test_rewrite_fails_prefilter_and_latency(config):
    result = admit(CANDIDATES / "rewrite.yaml", config)
    assert not result.prefilter_passed and not result.latency_ok
    assert result.gate("inference_duration").verdict == "fail"
    assert fmt_seconds(result.tiers[0].latency.total_s) == "18.4"
    assert result.to_dict()["route"]["route"] == "cloud"
    assert "token pre-filter" in result.route.reason


def test_intent_uses_the_task_override(config):
    result = admit(CANDIDATES / "intent.yaml", config)
    assert result.budget_total_s == 2.0  # task_overrides.intent.inference_duration.max_p95_ms
    assert result.gate("inference_duration").threshold == 2000
    assert {g.gate: g.verdict for g in result.gates} == {
        "peak_memory": "pass", "resident_memory": "pass", "inference_duration": "pass",
        "quality_loss": "pass", "failure_detectability": "pass"}
    assert result.score.worth_moving


def test_redaction_and_summary_verdicts(config):
    redaction = admit(CANDIDATES / "redaction.yaml", config)
    assert redaction.gate("inference_duration").verdict == "pass"  # asynchronous, 5.22 s
    assert redaction.rule.reason.startswith("strict privacy")
    summary = admit(CANDIDATES / "summary.yaml", config)
    assert summary.gate("quality_loss").verdict == "unknown"
    assert summary.gate("failure_detectability").verdict == "unknown"
    assert summary.to_dict()["prefilter"] == {"prompt_tokens": 1500, "output_tokens": 250, "total_tokens": 1750,
                                              "max_tokens": 400, "passed": False}


def test_candidates_document_the_schema():
    files = sorted(CANDIDATES.glob("*.yaml"))
    assert len(files) >= 4
    for path in files:
        assert path.read_text().startswith("# Candidate task for `pipeline admit"), path


# ---------------------------------------------------------------- bad candidates

GOOD = yaml.safe_load((CANDIDATES / "intent.yaml").read_text())


def _write(tmp_path: Path, raw) -> Path:
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _edit(dotted: str, value=None, delete: bool = False) -> dict:
    raw = copy.deepcopy(GOOD)
    *parents, last = dotted.split(".")
    node = raw
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if delete:
        del node[last]
    else:
        node[last] = value
    return raw


@pytest.mark.parametrize("raw, field, words", [
    (_edit("output_tokens", delete=True), "output_tokens", "is required"),
    (_edit("model.layers", delete=True), "model.layers", "is required"),
    (_edit("targets.0.decode_tps", delete=True), "targets[0].decode_tps", "is required"),
    (_edit("prompt_tokens", "forty"), "prompt_tokens", "must be a whole number"),
    (_edit("prompt_tokens", 40.5), "prompt_tokens", "must be a whole number"),
    (_edit("prompt_tokens", True), "prompt_tokens", "must be a whole number"),
    (_edit("needs_tools", "no way"), "needs_tools", "must be true or false"),
    (_edit("targets.1.npu", 1), "targets[1].npu", "must be true or false"),
    (_edit("model.params_billions", "1.8B"), "model.params_billions", "must be a number"),
    (_edit("model.params_billions", 0), "model.params_billions", "must be > 0"),
    (_edit("quality_loss", "low"), "quality_loss", "must be a number"),
    (_edit("privacy", "secret"), "privacy", "must be one of"),
    (_edit("targets.0.mem_class_gb", 5), "targets[0].mem_class_gb", "must be one of"),
    (_edit("targets", []), "targets", "non-empty list"),
    (_edit("model", "1.8b"), "model", "must be a mapping"),
    (_edit("tokens", 48), "tokens", "unknown key"),
    (_edit("model.quant", "int4"), "model.quant", "unknown key"),
    (_edit("latency_budget.p95_s", 3), "latency_budget.p95_s", "unknown key"),
    (_edit("model.embedding_unquantized_billions", 2.0), "model.embedding_unquantized_billions", "must not exceed"),
])
def test_bad_candidate_names_the_field(tmp_path, raw, field, words):
    path = _write(tmp_path, raw)
    with pytest.raises(ConfigError) as info:
        load_candidate(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert field in message and words in message
    assert "\n" not in message
    assert info.value.exit_code == 2


@pytest.mark.parametrize("text, words", [("", "must be a mapping"), ("- 1\n- 2\n", "must be a mapping"),
                                         ("task: [unclosed\n", "not valid YAML")])
def test_unusable_file(tmp_path, text, words):
    path = tmp_path / "task.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words):
        load_candidate(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_candidate(tmp_path / "missing.yaml")


def test_optional_fields_have_defaults(tmp_path):
    raw = copy.deepcopy(GOOD)
    for key in ("quality_loss", "failure_detectability", "latency_budget", "streamable"):
        raw.pop(key)
    raw["model"].pop("decode_power_w")
    del raw["targets"][1]["mem_bandwidth_gbps"]
    c = load_candidate(_write(tmp_path, raw))
    assert (c.streamable, c.asynchronous, c.quality_loss, c.failure_detectability) == (False, False, None, None)
    assert c.cloud == Cloud() and c.model.kv_bytes == 2 and c.model.decode_power_w is None
    assert c.targets[1].mem_bandwidth_gbps == LPDDR5_BANDWIDTH_GBPS and c.targets[1].throttle_ratio == 0.6
    result = assess(c, load_config())
    assert result.gate("inference_duration").verdict == "fail"  # neither streamable nor asynchronous
    assert result.gate("quality_loss").verdict == "unknown"
    assert result.thermal.energy_mwh is None
    assert result.route.route == "cloud"


# ---------------------------------------------------------------- thresholds follow the config


def _with_gate(config: Config, gate: str, **values) -> Config:
    gates = dataclasses.replace(config.gates, **{gate: dataclasses.replace(getattr(config.gates, gate), **values)})
    return dataclasses.replace(config, gates=gates)


def test_lower_peak_ratio_changes_the_memory_verdict(config):
    candidate = load_candidate(CANDIDATES / "redaction.yaml")  # no task override
    assert assess(candidate, config).gate("peak_memory").verdict == "pass"  # 19.8 % of 8 GB
    strict = assess(candidate, _with_gate(config, "peak_memory", max_p95_ratio=0.15))
    assert strict.gate("peak_memory").verdict == "fail"
    assert strict.gate("peak_memory").threshold == 0.15
    assert strict.route.route == "cloud" and "peak_memory" in strict.route.reason
    assert strict.rule.route == "edge_with_cloud_check"
    observed = assess(candidate, _with_gate(config, "peak_memory", max_p95_ratio=0.15, mode="observe"))
    assert observed.gate("peak_memory").verdict == "fail"
    assert observed.route.route == "edge_with_cloud_check"  # an observe-only gate does not block


def test_other_thresholds_follow_the_config(config):
    candidate = load_candidate(CANDIDATES / "redaction.yaml")
    assert assess(candidate, _with_gate(config, "resident_memory", max_p95_ratio=0.10)) \
        .gate("resident_memory").verdict == "fail"
    assert assess(candidate, _with_gate(config, "quality_loss", max_relative_loss=0.01)) \
        .gate("quality_loss").verdict == "fail"
    assert assess(candidate, _with_gate(config, "failure_detectability", min_share=0.95)) \
        .gate("failure_detectability").verdict == "fail"
    slow = assess(candidate, _with_gate(config, "inference_duration", max_p95_ms=5000))
    assert slow.gate("inference_duration").verdict == "fail"  # 5.22 s on mid
    # the latency budget's own total (8 s) is declared, so it stays
    assert slow.budget_total_s == 8.0


def test_task_override_ceiling(config):
    candidate = load_candidate(CANDIDATES / "intent.yaml")
    tighter = dataclasses.replace(config.gates_for("intent"), inference_duration=dataclasses.replace(
        config.gates_for("intent").inference_duration, max_p95_ms=1000))
    result = assess(candidate, dataclasses.replace(config, task_overrides={"intent": tighter}))
    assert result.gate("inference_duration").verdict == "fail"  # 1.25 s on mid
    assert not result.latency_ok and result.route.route == "cloud"


def test_latency_target_out_of_physical_reach(tmp_path, config):
    raw = _edit("latency_budget", {"total_s": 1.0})
    raw["output_tokens"] = 60
    result = assess(load_candidate(_write(tmp_path, raw)), config)
    high = result.tiers[1]  # 68.3 GB/s / 1.2 GB = 56.9 tok/s; 60 tokens in 1.0 - 0.31 s needs ~87 tok/s
    assert not high.reachable and high.required_tps > high.ceiling_tps
    assert any("out of physical reach" in n for n in result.notes)
    assert result.to_dict()["bandwidth"][1]["budget_physically_reachable"] is False


def test_admit_imports_nothing_heavy():
    code = ("import sys, pipeline.planning.admit; heavy = {'pandas', 'polars', 'duckdb', 'great_expectations',"
            " 'pyarrow', 'numpy'} & set(sys.modules); print(sorted(heavy)); sys.exit(bool(heavy))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_cli_admit_json_and_a_bad_file_exit_codes(tmp_path):
    from conftest import run_cli

    ok = run_cli("admit", "gates/candidates/intent.yaml", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["route"]["route"] == "edge"
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: x\n")
    proc = run_cli("admit", str(bad))
    assert proc.returncode == 2
    assert proc.stderr == f"pipeline admit: error: {bad}: prompt_tokens is required (typical input tokens)\n"
