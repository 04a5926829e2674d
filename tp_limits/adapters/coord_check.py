"""The adapter's coordinate check: the sizes of its updates measured across widths against
the classifier's exponents (docs/theory.md §16.2).

At widths n the toy network is fine-tuned for a few steps with η = η̄ n^{−c} for the given
exponents (c_A, c_B); at step t the root-mean-square entry of

    ΔZ_A = Z_A,t − Z_A,t−1,   ΔB = B_t − B_t−1,   δ¹ = (α/r) B_t−1 ΔZ_A,
    δ² = (α/r) ΔB Z_A,t−1,   ΔZ_B = v_t − v_t−1,   Δf = f_t − f_t−1

(over the width, the rank and the inputs, and over the seeds) is recorded, and the slope of
its logarithm against log n is compared with the exponent :func:`~.exponents.
classify_adapter` gives (a quantity that is exactly 0 at every width is skipped).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..spec.checks import check_int, check_sequence
from .exponents import NEG, classify_adapter
from .engine import _draw, _one
from .toy import LoRAToy, SineTask, require_toy

#: the measured quantities, in the order of :class:`~.exponents.Step`'s fields
QUANTITIES = ("dZA", "dB", "delta1", "delta2", "dZB", "df")


@dataclass(frozen=True)
class AdapterCoordCheck:
    """``sizes[q]`` (widths, steps): rms size of quantity q (:data:`QUANTITIES`) at each
    width and update t = 1..steps; ``predicted[q]`` (steps,): the classifier's exponents
    (−inf: exactly zero)."""

    widths: tuple
    c_A: Fraction
    c_B: Fraction
    sizes: dict
    predicted: dict

    def slope(self, q: str, t: int | None = None) -> float:
        """Fitted slope of log size against log n at update ``t`` (default: the last)."""
        t = self.sizes[q].shape[1] if t is None else t
        y = self.sizes[q][:, t - 1]
        if np.any(y <= 0):
            return NEG
        return float(np.polyfit(np.log(self.widths), np.log(y), 1)[0])

    def errors(self, t: int | None = None) -> dict:
        """q -> measured slope − predicted exponent at update ``t``, for the quantities the
        classifier predicts nonzero."""
        t = self.sizes["dZA"].shape[1] if t is None else t
        out = {}
        for q in QUANTITIES:
            want = self.predicted[q][t - 1]
            if want != NEG:
                out[q] = self.slope(q, t) - float(want)
        return out


def adapter_coord_check(toy: LoRAToy, task: SineTask, widths, eta_A: float, eta_B: float,
                        c_A=None, c_B=None, steps: int = 3, seeds: int = 4,
                        seed: int = 0) -> AdapterCoordCheck:
    """Measure the update sizes of the module docstring at ``widths`` with the rates
    η̄ n^{−c} (default exponents: the toy's maximal stable rates)."""
    toy = require_toy(toy, "adapter_coord_check")
    widths = tuple(check_int(n, "widths") for n in check_sequence(widths, "widths",
                                                                  "positive integers"))
    steps, seeds = check_int(steps, "steps"), check_int(seeds, "seeds")
    d_A, d_B = toy.exponents
    c_A = d_A if c_A is None else Fraction(c_A)
    c_B = d_B if c_B is None else Fraction(c_B)
    cls = classify_adapter(toy.optimizer, c_A, c_B, "hidden", toy.init, toy.p)
    predicted = {q: np.array([getattr(s, q) for s in cls.steps[:steps]], dtype=object)
                 for q in QUANTITIES}
    sizes = {q: np.zeros((len(widths), steps)) for q in QUANTITIES}
    for k, n in enumerate(widths):
        lr_A, lr_B = eta_A * n ** -float(c_A), eta_B * n ** -float(c_B)
        for s in range(seeds):
            rng = np.random.default_rng([seed, s, n])
            h, omega, B, za0 = _draw(toy, task, n, rng)
            seen = []
            _one(toy, task, h, omega, B, za0, n, lr_A, lr_B, steps, lambda t: None,
                 watch=lambda t, za, v, f, B: seen.append((za, v, f, B)))
            for t in range(1, len(seen)):
                (za0_, v0, f0, B0), (za1, v1, f1, B1) = seen[t - 1], seen[t]
                dza, dB = za1 - za0_, B1 - B0
                for q, x in (("dZA", dza), ("dB", dB),
                             ("delta1", toy.scale * B0 @ dza),
                             ("delta2", toy.scale * dB @ za0_),
                             ("dZB", v1 - v0), ("df", f1 - f0)):
                    sizes[q][k, t - 1] += np.mean(x * x) / seeds
    sizes = {q: np.sqrt(v) for q, v in sizes.items()}
    return AdapterCoordCheck(widths, c_A, c_B, sizes, predicted)
