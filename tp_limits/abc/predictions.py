"""Predicted width exponents of coordinate diagnostics (docs/theory.md §7.2, §6).

A prediction k for a quantity means: the quantity scales like n^k as the
width n grows, at a fixed step t >= 1.  Layer-indexed quantities give one
exponent per layer; ``delta_W_x``, ``spectral_ratio`` and ``frobenius_ratio``
also have an entry for the readout (layer L+1).

Formulas (SGD; Adam uses q^A, r^A):

    h, x                    max(init size, -rho_l(t)): 0 when stable
    delta_h, delta_x        -rho_l(t)            rho_l = min_{k<=l} r_k
    delta_W_x               -r_l(t)   (l <= L);   1 - q   (readout)
    spectral_ratio          -r_l(t)   (l <= L);   p - q   (readout)
    frobenius_ratio         -r_1, -r_l - 1/2 (2 <= l <= L), p - q
    f0                      1/2 - p
    delta_f                 -min(q - 1, p + r(t) - 1)
    feature_kernel_change   0 if r = 0, else -2r   (heuristic, §7.2)

r(t) uses the backward signal n^-p at t = 1 (only the step-0 update has
happened) and n^-m from t = 2 on.  Infinite exponents (a zero readout) come
back as ``sympy.oo`` / ``-sympy.oo``.
"""
from __future__ import annotations

from fractions import Fraction

from ..errors import InvalidParametrizationError
from .classify import _sym
from .exponents import exponents

HALF = Fraction(1, 2)

#: Quantities whose prediction is heuristic rather than derived.
HEURISTIC = frozenset({"feature_kernel_change"})

#: Quantities indexed by hidden layer (1..L) or by every layer (1..L+1).
HIDDEN_QUANTITIES = ("h", "x", "delta_h", "delta_x")
ALL_LAYER_QUANTITIES = ("delta_W_x", "spectral_ratio", "frobenius_ratio")
OUTPUT_QUANTITIES = ("f0", "delta_f", "feature_kernel_change")


def predicted_exponents(param, t: int = 2) -> dict:
    """Predicted exponents of n for every diagnostic at step ``t`` (t >= 1).

    Returns a dict quantity -> tuple of exact SymPy numbers (one per layer;
    one entry for output quantities).
    """
    if t < 1:
        raise InvalidParametrizationError(
            f"t = {t}: at t = 0 nothing has moved; predictions are for t >= 1")
    a, b, c = param._fractions
    L = param.L
    e = exponents(a, b, c, param.optimizer, first_step=(t == 1))
    p, q, r = e.p.value(), e.q.value(), e.r.value()
    r_l = [x.value() for x in e.r_layers]
    rho_l = [x.value() for x in e.rho_layers]

    size = [-(a[0] + b[0])]
    for l in range(1, L):
        size.append(size[-1] + HALF - (a[l] + b[l]))

    # h_t = h_0 + Δh_t: the larger of the two sizes wins
    grown = tuple(max(s0, -x) for s0, x in zip(size, rho_l))
    out = {
        "h": grown,
        "x": grown,
        "delta_h": tuple(-x for x in rho_l),
        "delta_x": tuple(-x for x in rho_l),
        "delta_W_x": tuple(-x for x in r_l) + (1 - q,),
        "spectral_ratio": tuple(-x for x in r_l) + (p - q,),
        "frobenius_ratio": (-r_l[0],) + tuple(-x - HALF for x in r_l[1:]) + (p - q,),
        "f0": (HALF - p,),
        "delta_f": (-min(q - 1, p + r - 1),),
        "feature_kernel_change": (0 * HALF if r == 0 else -2 * r,),
    }
    return {k: tuple(_sym(Fraction(v) if isinstance(v, int) else v) for v in vals)
            for k, vals in out.items()}
