"""Width exponents fitted from measurements over widths x seeds (docs/theory.md §7.4).

The exponent k of "value ~ n^k" is the least-squares slope of log(RMS over
seeds) against log n.  Its 95 % interval is t_{S-1}(0.975) · sd(per-seed
slopes) / √S; with a single seed it falls back to the regression's own
standard error (needs >= 3 widths), else NaN.
"""
from __future__ import annotations

import math

import numpy as np


def width_exponent(widths, values) -> tuple:
    """(slope, ci) for positive ``values`` of shape (len(widths), seeds)."""
    from scipy.stats import t as student
    logn = np.log(np.asarray(widths, float))
    values = np.asarray(values, float)
    mean_log = np.log(np.sqrt(np.mean(values ** 2, axis=1)))
    slope = float(np.polyfit(logn, mean_log, 1)[0])
    S = values.shape[1]
    if S >= 2:
        per_seed = [np.polyfit(logn, np.log(values[:, s]), 1)[0] for s in range(S)]
        return slope, float(student.ppf(0.975, S - 1) * np.std(per_seed, ddof=1) / math.sqrt(S))
    if len(logn) >= 3:
        resid = mean_log - np.polyval(np.polyfit(logn, mean_log, 1), logn)
        se = math.sqrt(np.sum(resid ** 2) / (len(logn) - 2) / np.sum((logn - logn.mean()) ** 2))
        return slope, float(student.ppf(0.975, len(logn) - 2) * se)
    return slope, float("nan")
