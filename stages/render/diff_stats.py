"""Confidence intervals for `campaign diff`: is a change outside the noise?

The change of a statistic (median, p90 or mean) from base to head is given as a percentage of the
base value, with a percentile bootstrap interval: each side's samples are resampled with
replacement, independently, `resamples` times with a fixed seed, the statistic is taken on each
resample, and the interval is the central `confidence` share of the resampled relative changes
(Efron and Tibshirani, An Introduction to the Bootstrap, ch. 13; site/sources.yaml).

The mark follows from where the interval lies against the tolerance band (+/- tolerance_pct):
wholly beyond it, better or worse (by the metric's direction); wholly within it, same; across its
edge, or with too few samples on a side, unclear.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

STATISTICS = {"median": 0.5, "p90": 0.9}


@dataclass(frozen=True)
class Settings:
    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 0
    min_samples: int = 5          # requests per side below which a per-request metric is unclear
    min_samples_p90: int = 20     # ... a p90 (with fewer, too few requests lie above it to resample)
    min_repeats: int = 2          # values per side below which a per-point metric is unclear

    @classmethod
    def from_params(cls, block: dict | None, **override) -> "Settings":
        block = {**(block or {}), **{k: v for k, v in override.items() if v is not None}}
        s = cls(**{k: block[k] for k in cls.__dataclass_fields__ if k in block})
        if not 0.5 <= s.confidence < 1:
            raise ValueError(f"confidence must lie in [0.5, 1), not {s.confidence}")
        if s.resamples < 100 or s.min_samples < 2 or s.min_repeats < 2 or s.min_samples_p90 < s.min_samples:
            raise ValueError("resamples must be >= 100, min_samples and min_repeats >= 2, "
                             "min_samples_p90 >= min_samples")
        return s


@dataclass(frozen=True)
class Interval:
    low_pct: float | None
    high_pct: float | None
    n_base: int
    n_head: int
    mark: str
    reason: str | None = None


def _stat(values: np.ndarray, statistic: str, axis: int | None = None) -> np.ndarray:
    if statistic == "mean":
        return values.mean(axis=axis)
    return np.quantile(values, STATISTICS[statistic], axis=axis)


def bootstrap_change(base: Sequence[float], head: Sequence[float], statistic: str, *,
                     confidence: float, resamples: int, seed: int) -> tuple[float, float] | None:
    """The percentile-bootstrap interval of 100 * (stat(head) - stat(base)) / |stat(base)|;
    None when a resampled base statistic is zero (no relative change exists)."""
    b = np.asarray(base, dtype=float)
    h = np.asarray(head, dtype=float)
    rng = np.random.default_rng(seed)
    bs = _stat(b[rng.integers(0, b.size, (resamples, b.size))], statistic, axis=1)
    hs = _stat(h[rng.integers(0, h.size, (resamples, h.size))], statistic, axis=1)
    if np.any(bs == 0):
        return None
    change = 100.0 * (hs - bs) / np.abs(bs)
    alpha = 1.0 - confidence
    low, high = np.quantile(change, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def mark_of(low: float, high: float, tolerance_pct: float, better_when: str) -> str:
    if low > tolerance_pct:
        return "better" if better_when == "higher" else "worse"
    if high < -tolerance_pct:
        return "better" if better_when == "lower" else "worse"
    if low >= -tolerance_pct and high <= tolerance_pct:
        return "same"
    return "unclear"


def compare_samples(base: Sequence[float], head: Sequence[float], *, statistic: str, better_when: str,
                    tolerance_pct: float, settings: Settings, minimum: int | None = None) -> Interval:
    """The interval of the change and its mark; unclear with fewer than `minimum` samples a side."""
    b = [float(v) for v in base if v is not None and np.isfinite(v)]
    h = [float(v) for v in head if v is not None and np.isfinite(v)]
    if minimum is not None:
        need = minimum
    else:
        need = settings.min_samples_p90 if statistic == "p90" else settings.min_samples
    if len(b) < need or len(h) < need:
        return Interval(None, None, len(b), len(h), "unclear",
                        f"too few samples (base {len(b)}, head {len(h)}; {need} a side needed)")
    ci = bootstrap_change(b, h, statistic, confidence=settings.confidence,
                          resamples=settings.resamples, seed=settings.seed)
    if ci is None:
        return Interval(None, None, len(b), len(h), "unclear", "base statistic is zero")
    low, high = ci
    mark = mark_of(low, high, tolerance_pct, better_when)
    reason = "interval crosses the tolerance" if mark == "unclear" else None
    return Interval(low, high, len(b), len(h), mark, reason)


def sample_summary(values: Sequence[float], limit: int = 12) -> dict:
    """n, median, p90 and the values (the first `limit`, sorted) of one side's samples."""
    v = np.sort(np.asarray([x for x in values if x is not None], dtype=float))
    if v.size == 0:
        return {"n": 0, "median": None, "p90": None, "values": []}
    return {"n": int(v.size), "median": float(np.median(v)), "p90": float(np.quantile(v, 0.9)),
            "values": [float(x) for x in v[:limit]], "more": int(max(0, v.size - limit))}
