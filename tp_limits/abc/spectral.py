"""The spectral condition (docs/theory.md §6).

Feature learning with stable, maximal updates needs, for every layer
W_l in R^{n_l x n_{l-1}},

    ||W_l||_* = Θ(sqrt(n_l / n_{l-1}))   and   ||ΔW_l||_* = Θ(sqrt(n_l / n_{l-1})).

:func:`parametrization` gives the per-layer init std and learning rate that
achieve it for arbitrary widths (Parametrization 1 of the spectral paper):

    init std  sigma_l = n_{l-1}^{-1/2} * min(1, sqrt(n_l / n_{l-1}))
    SGD LR    eta_l   = eta * n_l / n_{l-1}
    Adam LR   eta_l   = eta / n_{l-1}

Because a Gaussian matrix has ||W||_* ~ sigma (sqrt(n_l) + sqrt(n_{l-1})), a
batch-1 SGD gradient is rank one with ||grad||_* = ||grad h_l|| ||h_{l-1}||,
and a rank-one sign matrix has spectral norm sqrt(n_l n_{l-1}).

:func:`ratio_exponents` predicts ||ΔW_l||_* / ||W_l||_* for any
abc-parametrization: n^{-r_l} for hidden layers, n^{p-q} for the readout.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..errors import InvalidParametrizationError
from .update_rules import update_rule


@dataclass(frozen=True)
class SpectralLayer:
    """Init std and learning rate of one layer under the spectral condition."""

    fan_in: int
    fan_out: int
    init_std: float
    lr: float


def parametrization(widths: Sequence[int], optimizer: str = "sgd", lr: float = 1.0) -> tuple:
    """Per-layer init std and learning rate for layer widths ``(n_0, ..., n_L)``.

    ``widths[0]`` is the input dimension and ``widths[-1]`` the output
    dimension; every layer l maps n_{l-1} -> n_l.  ``lr`` is the
    width-independent base learning rate eta.
    """
    rule = update_rule(optimizer)
    ws = list(widths)
    if len(ws) < 2:
        raise InvalidParametrizationError(
            f"widths {ws!r}: give at least (input dim, output dim), one width per layer boundary")
    for w in ws:
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise InvalidParametrizationError(f"widths must be positive ints, got {w!r}")
    if not (lr > 0 and math.isfinite(lr)):
        raise InvalidParametrizationError(f"lr = {lr!r} must be a positive finite number")
    out = []
    for n_in, n_out in zip(ws[:-1], ws[1:]):
        std = n_in ** -0.5 * min(1.0, math.sqrt(n_out / n_in))
        eta = lr * rule.spectral_lr(n_in, n_out)
        out.append(SpectralLayer(n_in, n_out, std, eta))
    return tuple(out)


def ratio_exponents(param) -> tuple:
    """Predicted exponents of n for ||ΔW^l_t||_* / ||W^l_0||_*, l = 1..L+1.

    -r_l for l <= L and p - q for the readout (exact SymPy numbers).  Every
    entry is 0 exactly when the parametrization satisfies the spectral
    condition (it is muP up to symmetry).
    """
    return param.predicted_exponents()["spectral_ratio"]


def satisfies(param) -> bool:
    """True iff ``param`` (with d, d_out fixed) satisfies the spectral condition.

    ||W^l_0||_* has the required size iff the three initialization conditions
    hold and p = 1 (readout: entries n^-p over a d_o x n matrix gives
    n^{1/2-p}, required n^{-1/2}); ||ΔW^l||_* / ||W^l_0||_* = Θ(1) iff every
    r_l = 0 and p = q.
    """
    k = param.classify()
    init_ok = all(c.holds for c in k.conditions[:2]) and k.p == 1
    return bool(init_ok and all(e == 0 for e in ratio_exponents(param)))
