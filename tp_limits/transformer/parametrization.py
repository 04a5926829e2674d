"""The width exponents of a transformer's parameters (docs/theory.md §17.2).

Each parameter of kind k is drawn with entries N(0, σ² n^{−2 b_k}) and trained at the rate
η n^{−c_k}; Adam's ε is width-free in units of the gradient entry, Θ(n^{−g_k}) (the finite
network uses ε n^{−g_k}, as docs/theory.md §10.3 does for MLPs).

μP (its SGD and Adam rates differ), with the embedding an input layer of fixed fan-in V:

    kind        b     c (SGD)   c (Adam)   g
    embedding   0     −1        0          1
    hidden      ½     0         1          1
    readout     1     1         1          0

Standard practice ("sp"): b = (0, ½, ½), one width-free rate for every parameter, and the
gradient entries' g = (½, ½, 0) (the readout's n^{−½} entries carry the backward pass).

The NTK parametrization ("ntk", SGD only): b = (0, ½, ½) as standard practice, and the rates
c = (0, 1, 1) that make every parameter's share of the tangent kernel Θ(1) at
initialization — the kernel regime (docs/theory.md §17.6).
"""
from __future__ import annotations

from fractions import Fraction as F

from ..errors import SpecError

_HALF = F(1, 2)
#: param -> kind -> b
INIT = {"mup": {"embedding": F(0), "hidden": _HALF, "readout": F(1)},
        "sp": {"embedding": F(0), "hidden": _HALF, "readout": _HALF},
        "ntk": {"embedding": F(0), "hidden": _HALF, "readout": _HALF}}
#: (param, optimizer name) -> kind -> c
RATES = {("mup", "sgd"): {"embedding": F(-1), "hidden": F(0), "readout": F(1)},
         ("mup", "adam"): {"embedding": F(0), "hidden": F(1), "readout": F(1)},
         ("sp", "sgd"): {"embedding": F(0), "hidden": F(0), "readout": F(0)},
         ("sp", "adam"): {"embedding": F(0), "hidden": F(0), "readout": F(0)},
         ("ntk", "sgd"): {"embedding": F(0), "hidden": F(1), "readout": F(1)}}


def init_exponent(param: str, kind: str) -> F:
    """b of a parameter of ``kind``: entries N(0, σ² n^{−2b})."""
    return INIT[param][kind]


def rate_exponent(param: str, optimizer: str, kind: str) -> F:
    """c of a parameter of ``kind`` trained by ``optimizer`` ("sgd" or "adam"): η n^{−c}."""
    if (param, optimizer) not in RATES:
        raise SpecError(f"param = {param!r} with {optimizer}: the NTK parametrization is "
                        "SGD's kernel regime; train it with SGD(), or use param = 'mup'")
    return RATES[(param, optimizer)][kind]


def learning_rate(model, optimizer: str, kind: str, lr: float, n) -> float:
    """The rate of a parameter of ``kind`` at width ``n`` (None: the limit's width-free
    rate): η n^{−c}, times the model's residual factor (K^{−γ} on the hidden matrices)."""
    scale = 1.0 if n is None else float(n) ** -float(rate_exponent(model.param, optimizer,
                                                                     kind))
    return lr * scale * model.rate_factor(kind)


def gradient_exponent(param: str, kind: str) -> F:
    """g of the gradient entries of a parameter of ``kind`` at initialization, Θ(n^{−g}):
    the readout's are Θ(1); the others carry the backward vector W_outᵀ χ, of entries
    Θ(n^{−b_out})."""
    return F(0) if kind == "readout" else INIT[param]["readout"]
