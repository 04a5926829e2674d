"""Named parametrizations of TP4's Table 1 (docs/theory.md §1.5).

=============  ======================  ==========================  ==========
name           a_1, a_l, a_{L+1}       b_1, b_l, b_{L+1}           c
=============  ======================  ==========================  ==========
SP             0, 0, 0                 0, 1/2, 1/2                 c (0 or 1)
NTP            0, 1/2, 1/2             0, 0, 0                     0
MFP (L = 1)    0, 1                    0, 0                        -1
muP (TP4)      -1/2, 0, 1/2            1/2, 1/2, 1/2               0
muP (a = 0)    0, 0, 0                 0, 1/2, 1                   -1, 0, 1
=============  ======================  ==========================  ==========

Adam-muP (a = 0 form): b = (0, 1/2, .., 1/2, 1), c = (0, 1, .., 1, 1); its
TP4 form is obtained with the same shift θ = (-1/2, 0, .., 0, 1/2) as for SGD.
"""
from __future__ import annotations

import numbers

from ..errors import InvalidParametrizationError
from .parametrization import ABC, MAX_L
from .symmetry import shift
from .update_rules import update_rule

HALF = "1/2"


def _check_L(L) -> int:
    if isinstance(L, bool) or not isinstance(L, numbers.Integral) or L < 1:
        raise InvalidParametrizationError(
            f"L = {L!r}: the number of hidden layers must be an int >= 1")
    if L > MAX_L:
        raise InvalidParametrizationError(
            f"L = {L} hidden layers exceeds the supported maximum of {MAX_L}")
    return int(L)


def sp(L: int = 1, c=0) -> ABC:
    """Standard parametrization: W ~ N(0, 1/fan_in), learning rate eta n^-c."""
    L = _check_L(L)
    name = "SP" if str(c) == "0" else f"SP (c={c})"
    return ABC([0] * (L + 1), [0] + [HALF] * L, c, name=name)


def ntp(L: int = 1, c=0) -> ABC:
    """Neural tangent parametrization: W^l = n^{-1/2} w^l for l >= 2, w ~ N(0, 1)."""
    L = _check_L(L)
    name = "NTP" if str(c) == "0" else f"NTP (c={c})"
    return ABC([0] + [HALF] * L, [0] * (L + 1), c, name=name)


def mfp(L: int = 1) -> ABC:
    """Mean-field parametrization of a one-hidden-layer net (L = 1 only).

    f = n^-1 sum_i v_i phi(u_i . x) with learning rate eta n: a = (0, 1),
    b = (0, 0), c = -1.  It equals muP (L = 1) by the symmetry θ = 1/2.
    """
    L = _check_L(L)
    if L != 1:
        raise InvalidParametrizationError(
            f"mfp() is defined for L = 1 only (asked L = {L}): its naive deep extension "
            "(a_l = 1, b_l = 0 for hidden layers) has a_l + b_l = 1 != 1/2, so hidden "
            "pre-activations vanish. Use mup(L) for deep feature learning")
    return ABC([0, 1], [0, 0], -1, name="MFP")


def mup(L: int = 1, form: str = "tp4", optimizer: str = "sgd") -> ABC:
    """Maximal update parametrization (muP).

    ``form="tp4"``: a = (-1/2, 0, .., 0, 1/2), b = 1/2, c = 0 (SGD).
    ``form="a0"``: the equivalent a = 0 form with per-layer learning rates
    (SGD: c = (-1, 0, .., 0, 1), i.e. LR eta n, eta, eta/n).
    ``optimizer="adam"``: Adam-muP (a = 0 form: c = (0, 1, .., 1, 1)).
    """
    L = _check_L(L)
    if form not in ("tp4", "a0"):
        raise InvalidParametrizationError(f"unknown form {form!r}; use 'tp4' or 'a0'")
    c = update_rule(optimizer).mup_c(L)
    suffix = "" if optimizer == "sgd" else f" {optimizer.capitalize()}"
    a0 = ABC([0] * (L + 1), [0] + [HALF] * (L - 1) + [1], c, optimizer,
             name=f"muP{suffix} (a=0 form)")
    if form == "a0":
        return a0
    tp4 = shift(a0, ["-1/2"] + [0] * (L - 1) + [HALF])
    return ABC(tp4.a, tp4.b, tp4.c, optimizer, name=f"muP{suffix}")


PRESETS = {"sp": sp, "ntp": ntp, "mfp": mfp, "mup": mup}


def from_options(preset=None, L=None, a=None, b=None, c=None, form: str = "tp4",
                 optimizer: str = "sgd", name: str = "") -> ABC:
    """A parametrization from the options of the CLI and of experiment files.

    Either a ``preset`` name with ``L`` (``c`` for sp/ntp; ``form`` and
    ``optimizer`` for mup), or explicit ``a``, ``b`` and ``c`` (default 0).
    """
    if preset is not None:
        if a is not None or b is not None:
            raise InvalidParametrizationError("give either a preset name or a and b, not both")
        if preset not in PRESETS:
            raise InvalidParametrizationError(
                f"unknown preset {preset!r}; choose one of {', '.join(sorted(PRESETS))}")
        kwargs = {}
        if c is not None:
            if preset not in ("sp", "ntp"):
                raise InvalidParametrizationError(
                    f"c applies to presets sp and ntp only, not {preset}")
            kwargs["c"] = c
        if preset == "mup":
            kwargs.update(form=form, optimizer=optimizer)
        elif optimizer != "sgd" or form != "tp4":
            raise InvalidParametrizationError(
                "form/optimizer apply to the mup preset only (give a, b, c and the optimizer "
                "for other parametrizations)")
        return PRESETS[preset](L, **kwargs)
    if a is None or b is None:
        raise InvalidParametrizationError("give a preset (sp, ntp, mfp, mup) or both a and b")
    return ABC(a, b, 0 if c is None else c, optimizer=optimizer, name=name)
