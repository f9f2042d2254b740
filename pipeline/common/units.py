"""Every figure a person reads, in one unit and one format, whatever renders it (the terminal, the report, the
alert): shares in %, latency in ms, the temperature rise in °C, p-values as "p < 0.001" or "p = 0.042"."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from pipeline.common.registry import BY_NAME, GateName


def percent(share: float) -> str:
    """0.4712 -> '47.1%', 0.048 -> '4.8%', 0.0035 -> '0.35%', 0.4 -> '40%'."""
    p = share * 100
    text = f"{p:.1f}" if abs(p) >= 1 else f"{p:.2g}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text}%"


def in_unit(value: float | None, unit: str, short: bool = False) -> str:
    """A gate figure in its registry unit; `short` drops the unit word (the column title names it)."""
    if value is None or math.isnan(value):
        return "?"
    if math.isinf(value):  # e.g. an upper bound no test could set
        return "∞" if value > 0 else "-∞"
    if unit == "ratio of RAM":
        return percent(value) + ("" if short else " of RAM")
    if unit in ("share", "relative loss"):
        return percent(value)
    if unit == "ms":
        return f"{value:,.0f}" + ("" if short else " ms")
    if unit == "°C":
        return f"{value:.1f}" + ("" if short else " °C")
    return f"{value:.3g}"


def seconds_text(seconds: float | None) -> str:
    """A duration people read: 0.42 -> '0.4 s', 95 -> '1 min 35 s', 4000 -> '1 h 7 min'; None -> '?'."""
    if seconds is None or math.isnan(seconds):
        return "?"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    return f"{minutes // 60} h {minutes % 60} min"


def p_text(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def alpha_text(alpha: float) -> str:
    """A test's level in %, two significant digits, halves rounded up: 0.00625 -> '0.63%' whether it was read
    from a stored evaluation (rounded to 6 digits) or computed (0.006250000000001)."""
    exact = Decimal(repr(round(alpha * 100, 10)))
    if not exact:
        return "0%"
    shown = exact.quantize(Decimal(1).scaleb(exact.adjusted() - 1), ROUND_HALF_UP).normalize()
    return f"{shown:f}%"


def limit_text(check: Any, short: bool = False) -> str:
    """A check's threshold with its comparison, in the gate's unit: '<= 10,000 ms', '>= 90%', '< cloud 9,275 ms'."""
    return limit_of(check.gate, check.threshold, short)


def figure_of(gate: str, value: float | None, short: bool = False) -> str:
    """A figure of a gate as stored (an evaluation's JSON), in the gate's unit."""
    spec = BY_NAME.get(gate)
    return in_unit(value, spec.unit if spec else "", short)


def limit_of(gate: str, threshold: float | None, short: bool = False) -> str:
    """limit_text of a gate and threshold as stored (an evaluation's JSON)."""
    if gate == GateName.WEAK_NETWORK_LATENCY:
        return "< cloud" + (f" {in_unit(threshold, 'ms', short)}" if threshold is not None else "")
    if threshold is None:
        return ""
    spec = BY_NAME.get(gate)
    return (">=" if spec and spec.direction == "min" else "<=") + ("" if short else " ") + figure_of(
        gate, threshold, short)


def interval_text(iv: Sequence[float | None] | None, unit: str, alpha: float | None = None) -> str:
    """The decision's interval (at the alpha its test had), or with no alpha a fixed 95 % one, said so."""
    if not iv or (iv[0] is None and iv[1] is None):
        return ""
    lo = in_unit(iv[0], unit, short=True) if iv[0] is not None else "unbounded"
    hi = in_unit(iv[1], unit) if iv[1] is not None else "unbounded (too few values for an upper bound)"
    if alpha is None:
        return f"95% interval {lo} to {hi} (for reading: not the decision's)"
    return f"decision interval {lo} to {hi} (at alpha {alpha_text(alpha)}, the level its test had)"
