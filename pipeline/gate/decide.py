"""The gate's second step (pipeline/gate/evaluate.py measures; docs/how-the-gate-decides.md): one pass over all
the checks of an evaluation. The error budget alpha = 1 - confidence is split equally over the enforced gates that
can cause a rollback on evidence of harm, then over each gate's tests (budget_split); inside each (gate, test)
family Holm runs across the checks tested, after the release-wide gatekeeper. Each check gets its status, the
interval of its decision drawn at the level it was tested at, and how many devices would catch a regression of
twice its tolerance (settle)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pipeline.common.config import Config
from pipeline.common.registry import BY_NAME, GATE_NAMES
from pipeline.common.vocabulary import Status
from pipeline.gate import stats
from pipeline.gate.result import DETECT_POWER, GateCheck

# why a check failed when only this test rejected
_TEST_NOTES = {"throttled_share": "throttled share above its ceiling", "excess": "fallback rate above the cloud's "
               "by more than the margin", "ceiling": "fallback rate above its ceiling"}


def budget_split(config: Config) -> dict[tuple[str, str], float]:
    """alpha per (gate, test) family: 1 - confidence, split equally over the gates that can fail on
    evidence of harm (enforced or held somewhere with burden prove_harm: a false hold stalls recovery), then
    over each gate's tests. Observe gates and prove_safe gates are tested at the same share without spending
    the budget: they never cause a false rollback on evidence (observe never blocks; prove_safe's errors are
    false keeps)."""
    alpha = 1 - config.statistics.confidence
    every = [config.gates, *(config.task_overrides or {}).values()]
    spending = [g for g in GATE_NAMES
                if any(getattr(gs, g).mode in ("enforce", "hold") and getattr(gs, g).burden == "prove_harm"
                       for gs in every)]
    per_gate = alpha / max(1, len(spending))
    return {(g, t): per_gate / len(BY_NAME[g].tests) for g in GATE_NAMES for t in BY_NAME[g].tests}


def decide(checks: Sequence[GateCheck], config: Config) -> list[str]:
    """Step 2: the status of every check of one evaluation, in one pass (pure: nothing is changed)."""
    return _statuses(checks, _test_outcomes(checks, config))


def _statuses(checks: Sequence[GateCheck], outcome: dict[tuple[int, str], tuple[float, bool]]) -> list[str]:
    statuses = []
    for i, check in enumerate(checks):
        harm = any(outcome[(i, name)][1] for name, t in check.tests.items() if t.burden == "prove_harm")
        unproven = any(not outcome[(i, name)][1] for name, t in check.tests.items()
                       if t.burden == "prove_safe" and math.isfinite(t.p_value) and check.values_needed is None)
        undecidable = any(not math.isfinite(t.p_value) for t in check.tests.values())
        if check.inapplicable:
            statuses.append(Status.NOT_APPLICABLE)
        elif harm or unproven:
            statuses.append(Status.FAIL)
        elif check.short_of_data or undecidable or check.values_needed is not None or not check.tests:
            statuses.append(Status.INSUFFICIENT_DATA)  # no evidence is never a pass
        else:
            statuses.append(Status.PASS)
    return statuses


def _test_outcomes(checks: Sequence[GateCheck], config: Config) -> dict[tuple[int, str], tuple[float, bool]]:
    """(index of the check, test name) -> (the level it was tested at, rejected). Each prove_harm family gets
    its gate's alpha. When the family has a release-wide check, a graphical gatekeeping procedure (Bretz et
    al. 2009): the release-wide check first at primary_share x alpha; the segment checks by Holm at the rest,
    or, once the release-wide check rejects, by Benjamini-Hochberg at the whole alpha (which segments roll
    back is then a partial rollback: FDR among them); if every segment check rejects at its Holm level, the
    release-wide check is retested at the whole alpha. Without one, Holm over the segment checks. Each
    prove_safe test at the family's share on its own. Checks that read one shared figure (`shared`: every
    segment of a tier for kill_rate) are one hypothesis: the first stands for them all."""
    split = budget_split(config)
    families: dict[tuple[str, str], dict[int, float]] = {}
    out: dict[tuple[int, str], tuple[float, bool]] = {}
    first_of: dict[tuple, int] = {}  # (gate, shared, threshold) -> the check that stands for the hypothesis
    copies: dict[int, int] = {}  # a check reading a figure another already stands for -> that check
    for i, check in enumerate(checks):
        if check.shared:  # the same figure against the same threshold (a task override may set its own)
            copies[i] = first_of.setdefault((check.gate, check.shared, check.threshold), i)
            if copies[i] == i:
                del copies[i]
        for name, t in check.tests.items():
            level = split[(check.gate, name)]
            if i in copies:
                continue
            if t.burden == "prove_harm" and check.values_needed is None:
                families.setdefault((check.gate, name), {})[i] = t.p_value
            else:
                alpha = 1 - config.statistics.confidence if t.burden == "prove_safe" else level
                out[(i, name)] = (alpha, math.isfinite(t.p_value) and t.p_value <= alpha)
    for (gate, name), ps in families.items():
        alpha = split[(gate, name)]
        primary = [i for i in ps if checks[i].release_wide]
        segments = {i: p for i, p in ps.items() if not checks[i].release_wide}
        if not primary:
            _holm_into(out, name, segments, alpha)
            continue
        first, share = primary[0], config.statistics.primary_share
        p0 = ps[first]
        if math.isfinite(p0) and p0 <= share * alpha:
            out[(first, name)] = (share * alpha, True)
            rejected, levels = stats.benjamini_hochberg(segments, alpha), stats.bh_levels(segments, alpha)
            for i in segments:
                out[(i, name)] = (levels.get(i, alpha), i in rejected)
            continue
        out[(first, name)] = (share * alpha, False)
        rejected = _holm_into(out, name, segments, (1 - share) * alpha)
        finite = [i for i, p in segments.items() if math.isfinite(p)]
        if finite and all(i in rejected for i in finite):  # the segments pass their alpha back
            out[(first, name)] = (alpha, math.isfinite(p0) and p0 <= alpha)
    for i, stands_for in copies.items():  # one hypothesis, one outcome, in every check that reads it
        for name in checks[i].tests:
            out[(i, name)] = out[(stands_for, name)]
    return out


def _holm_into(out: dict[tuple[int, str], tuple[float, bool]], name: str, ps: dict[int, float],
               alpha: float) -> set:
    rejected, levels = stats.holm(ps, alpha), stats.holm_levels(ps, alpha)
    for i in ps:
        out[(i, name)] = (levels.get(i, alpha), i in rejected)
    return rejected


def settle(checks: Sequence[GateCheck], config: Config, days_observed: float = 0.0) -> None:
    outcome = _test_outcomes(checks, config)
    for i, (check, status) in enumerate(zip(checks, _statuses(checks, outcome), strict=True)):
        check.status = status
        for name, t in check.tests.items():
            t.alpha, t.rejected = outcome[(i, name)]
        finite = [t.p_value for t in check.tests.values() if math.isfinite(t.p_value)]
        check.p_value = min(finite) if finite else None
        by_test = [name for name, t in check.tests.items() if t.rejected and t.burden == "prove_harm"]
        if status == Status.FAIL and by_test and by_test[0] in _TEST_NOTES:
            check.add_note(_TEST_NOTES[by_test[0]])
        _draw_interval(check, outcome.get((i, check.main_test), (None, False))[0], config)
    _size(checks, config, days_observed)


def _draw_interval(check: GateCheck, alpha: float | None, config: Config) -> None:
    """The interval shown beside the decision: the check's test inverted at the level it was tested at (for
    a check short of data, at the level its family would give it first)."""
    if check.bounds is None:
        return
    if alpha is None:
        alpha = budget_split(config)[(check.gate, check.main_test)]
    check.interval, check.interval_alpha = check.bounds(alpha), alpha


def _size(checks: Sequence[GateCheck], config: Config, days_observed: float) -> None:
    """devices_to_detect (Sizing), at the level the sized test was tested at: how many edge devices, and
    how many more nights at the inflow so far (devices seen / days observed), until a regression of twice
    the tolerance is caught with DETECT_POWER, with the design effects and cloud share observed."""
    for c in checks:
        if c.sizing is None or c.sizing.test not in c.tests:
            continue
        test = c.tests[c.sizing.test]
        # borderline: the estimate is already past the threshold, not yet proven; more devices could fail it.
        # (An interval that merely holds the threshold is nearly every check of a young release: no mark.)
        c.borderline = c.sizing.past and c.status == Status.PASS and not test.rejected
        if not c.sizing.devices or not c.sizing.units:
            continue
        alpha = test.alpha or budget_split(config)[(c.gate, c.sizing.test)]
        units = c.sizing.units_at(alpha)
        if units is None:
            continue
        now = c.sizing.devices
        devices = math.ceil(units * now / c.sizing.units)
        more = max(0, devices - now)
        c.extra["devices_to_detect"] = devices
        c.extra["more_devices_to_detect"] = more
        inflow = now / days_observed if days_observed > 0 else 0.0
        c.extra["nights_to_detect"] = math.ceil(more / inflow) if more and inflow else 0
        if c.sizing.past and c.status != Status.FAIL and not test.rejected:
            wait = (f"about {more:,} more edge devices (~{c.extra['nights_to_detect']:,} nights at the current "
                    "inflow)" if more else "more nights of the same devices")
            c.add_note(f"past the threshold but not yet significant at alpha {alpha * 100:.2g}%: {wait} "
                                    f"would catch {c.sizing.catches} with {DETECT_POWER * 100:.0f} % power")
