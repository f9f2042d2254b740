"""Every figure a person reads goes through pipeline/common/units.py: the same value prints the same way in the
terminal, the report and the alert."""

from __future__ import annotations

import pytest

from pipeline.common.units import alpha_text, figure_of, in_unit, interval_text, limit_of, p_text, percent, seconds_text


@pytest.mark.parametrize(("share", "text"), [(0.4712, "47.1%"), (0.048, "4.8%"), (0.0035, "0.35%"), (0.4, "40%"),
                                             (1.0, "100%"), (0.0, "0%"), (-0.059, "-5.9%")])
def test_shares_print_as_percent_without_trailing_zeros(share, text):
    assert percent(share) == text


@pytest.mark.parametrize(("value", "unit", "short", "text"), [
    (0.47, "ratio of RAM", False, "47% of RAM"), (0.47, "ratio of RAM", True, "47%"),
    (17070.4, "ms", False, "17,070 ms"), (17070.4, "ms", True, "17,070"),
    (9.66, "°C", False, "9.7 °C"), (0.105803, "relative loss", False, "10.6%"), (0.071, "share", True, "7.1%"),
    (None, "ms", False, "?"), (float("nan"), "share", False, "?"), (float("inf"), "ms", False, "∞"),
    (float("-inf"), "share", True, "-∞"),
])
def test_a_figure_prints_in_its_gates_unit(value, unit, short, text):
    assert in_unit(value, unit, short) == text


def test_an_alpha_prints_alike_whether_stored_or_computed():
    """A stored evaluation rounds to 6 digits (0.00625); the gate's own float is 0.006250000000000001. Both are
    the same level and must not print as 0.62% in one output and 0.63% in another."""
    assert alpha_text(0.00625) == alpha_text(0.006250000000000001) == "0.63%"
    assert [alpha_text(a) for a in (0.005, 0.0005, 0.001, 0.00014, 0.2, 0)] == ["0.5%", "0.05%", "0.1%", "0.014%",
                                                                                 "20%", "0%"]


def test_p_values_limits_and_intervals_read_the_same_everywhere():
    assert (p_text(4.11e-37), p_text(0.0423)) == ("p < 0.001", "p = 0.042")
    assert limit_of("inference_duration", 10_000) == "<= 10,000 ms"
    assert limit_of("failure_detectability", 0.9, short=True) == ">=90%"
    assert limit_of("weak_network_latency", 9275.2) == "< cloud 9,275 ms"
    assert figure_of("peak_memory", 0.4712, short=True) == "47.1%"
    assert interval_text([0.127, 0.184], "relative loss", 0.005) == \
        "decision interval 12.7% to 18.4% (at alpha 0.5%, the level its test had)"
    assert interval_text([0.1, None], "share") == \
        "95% interval 10% to unbounded (too few values for an upper bound) (for reading: not the decision's)"


@pytest.mark.parametrize(("seconds", "text"), [(0.42, "0.4 s"), (59.94, "59.9 s"), (95, "1 min 35 s"),
                                               (4000, "1 h 6 min"), (None, "?"), (float("nan"), "?")])
def test_durations_print_in_the_unit_a_person_reads(seconds, text):
    assert seconds_text(seconds) == text
