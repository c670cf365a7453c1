"""The intervals of `campaign diff` on constructed samples: noise is not marked, a clear shift is,
in the right direction, and too few samples say so."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from stages.render import diff_stats

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = diff_stats.Settings.from_params(yaml.safe_load((ROOT / "params.yaml").read_text()).get("diff"))
TOLERANCE = 5.0
SEEDS = 200


def compare(base, head, statistic="median", better_when="lower", tolerance=TOLERANCE, **kw):
    return diff_stats.compare_samples(base, head, statistic=statistic, better_when=better_when,
                                      tolerance_pct=tolerance, settings=SETTINGS, **kw)


@pytest.mark.parametrize("statistic, n, sigma", [
    ("median", 5, 0.5), ("median", 10, 0.2), ("median", 40, 0.2),
    ("p90", 20, 0.5), ("p90", 40, 0.2),
])
def test_identical_distributions_are_marked_better_or_worse_at_most_at_the_stated_rate(statistic, n, sigma):
    marks = []
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        # request times of one skewed distribution, drawn twice
        base, head = rng.lognormal(0.0, sigma, n), rng.lognormal(0.0, sigma, n)
        marks.append(compare(base, head, statistic).mark)
    assert set(marks) <= {"better", "worse", "same", "unclear"}
    false_rate = sum(m in ("better", "worse") for m in marks) / SEEDS
    assert false_rate <= 1 - SETTINGS.confidence


def test_tight_identical_samples_are_same():
    rng = np.random.default_rng(3)
    base, head = rng.normal(100.0, 1.0, 50), rng.normal(100.0, 1.0, 50)
    iv = compare(base, head)
    assert iv.mark == "same" and -TOLERANCE <= iv.low_pct < 0 < iv.high_pct <= TOLERANCE


@pytest.mark.parametrize("statistic", ["median", "p90"])
@pytest.mark.parametrize("sign, better_when, expected", [
    (+1, "lower", "worse"),      # latency up: worse
    (-1, "lower", "better"),     # latency down: better
    (+1, "higher", "better"),    # throughput up: better
    (-1, "higher", "worse"),     # throughput down: worse
])
def test_a_shift_of_three_spreads_gets_its_mark_and_direction(statistic, sign, better_when, expected):
    spread = 5.0
    rng = np.random.default_rng(11)
    base = rng.normal(100.0, spread, 30)
    head = rng.normal(100.0 + sign * 3 * spread, spread, 30)
    iv = compare(base, head, statistic, better_when)
    assert iv.mark == expected
    assert (iv.n_base, iv.n_head) == (30, 30)
    # the interval lies on the side of the shift, beyond the tolerance, and holds the true change
    assert (iv.low_pct > TOLERANCE) if sign > 0 else (iv.high_pct < -TOLERANCE)
    assert iv.low_pct < sign * 15.0 < iv.high_pct


def test_a_p90_needs_more_requests_than_a_median():
    # with ten requests a side the p90 rests on the one or two slowest: not resampled, unclear
    base, head = np.linspace(1.0, 1.1, 10), np.linspace(2.0, 2.2, 10)
    assert compare(base, head, "median").mark == "worse"
    iv = compare(base, head, "p90")
    assert iv.mark == "unclear" and f"{SETTINGS.min_samples_p90} a side needed" in iv.reason


def test_two_requests_a_side_are_unclear_and_say_how_many():
    iv = compare([1.0, 1.01], [2.0, 2.02])         # doubled, but on two requests
    assert (iv.mark, iv.low_pct, iv.high_pct, iv.n_base, iv.n_head) == ("unclear", None, None, 2, 2)
    assert iv.reason == f"too few samples (base 2, head 2; {SETTINGS.min_samples} a side needed)"


def test_throughput_across_repeats_one_value_a_side_is_unclear_several_are_compared():
    one = compare([50.0], [80.0], "mean", "higher", minimum=SETTINGS.min_repeats)
    assert (one.mark, one.n_base, one.n_head) == ("unclear", 1, 1)
    three = compare([50.0, 50.5, 49.6], [60.2, 59.8, 60.5], "mean", "higher", minimum=SETTINGS.min_repeats)
    assert three.mark == "better" and three.low_pct > TOLERANCE
    spread = compare([50.0, 58.0, 44.0], [52.0, 61.0, 45.0], "mean", "higher", minimum=SETTINGS.min_repeats)
    assert spread.mark == "unclear" and spread.low_pct < TOLERANCE < spread.high_pct


def test_missing_values_are_not_samples_and_a_zero_base_has_no_relative_change():
    iv = compare([1.0, None, float("nan"), 1.1, 0.9, 1.0, 1.05], [1.0] * 5)
    assert (iv.n_base, iv.n_head) == (5, 5)
    zero = compare([0.0] * 6, [1.0] * 6)
    assert (zero.mark, zero.reason) == ("unclear", "base statistic is zero")


def test_the_interval_is_reproducible_from_its_seed():
    rng = np.random.default_rng(5)
    base, head = rng.normal(10, 1, 20), rng.normal(10.5, 1, 20)
    assert compare(base, head) == compare(base, head)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="confidence"):
        diff_stats.Settings.from_params({"confidence": 1.2})
    with pytest.raises(ValueError, match="min_samples"):
        diff_stats.Settings.from_params({"min_samples": 1})
    assert diff_stats.Settings.from_params({"confidence": 0.9}, resamples=500).resamples == 500


def test_sample_summary_gives_n_median_p90_and_a_compact_list():
    s = diff_stats.sample_summary(list(range(20, 0, -1)), limit=5)
    assert (s["n"], s["median"], s["values"], s["more"]) == (20, 10.5, [1.0, 2.0, 3.0, 4.0, 5.0], 15)
    assert s["p90"] == pytest.approx(18.1)
    assert diff_stats.sample_summary([])["n"] == 0
