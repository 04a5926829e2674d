"""A linear one-hidden-layer network with a zero readout as a pair of matrices (E_in, E_out),
at width n or in its limit (docs/theory.md §15.2): the state both Word2Vec and MAML train.

f(ξ) = α (ξᵀ E_in) E_outᵀ, rows of E_in the input weights' columns u_i = W¹e_i and rows of
E_out the readout's rows.  At width n the rows live in ℝⁿ (E_in = W¹ᵀ, E_out = W²); in the
limit in the span of the initial input columns, Z^{u_i} = Σ_v A_{iv} z_v, Z^{nW²_j} =
Σ_v C_{jv} z_v, so E_in = A (A_0 = σI, d_in columns), E_out = C (C_0 = 0).  One SGD step
on a batch with χ = ∇_f ℓ / B (B × d_out) is, in both cases,

    E_out −= η_out α χᵀ (X E_in),      E_in −= η_in α Xᵀ (χ E_out),

with (η_in, η_out) the W-space rates of ``MLP.finite_constants`` or the limit's η_l of
``MLP.limit_constants``; in the GP limit (features frozen) η_in = 0 and η_out = η·lr_mult.
"""
from __future__ import annotations

import math

import numpy as np
import sympy

from ..abc.parametrization import ABC
from ..errors import SpecError
from ..spec.checks import check_choice, check_int, check_width, finite_positive
from ..spec.mlp import MLP

#: the limits of a run at width = inf: the feature-learning limit, or the kernel regime's
#: GP limit (input weights frozen at initialization, the readout trained)
LIMITS = ("feature", "gp")


def zero_readout_network(param: ABC, d_in: int, d_out: int, sigma: float = 1.0) -> MLP:
    """``param`` (one hidden layer, e.g. ``tp.mup(1)`` or ``tp.ntp(1)``) with its readout
    initialized to 0 (b₂ = ∞), φ = id, input weights of std ``sigma``."""
    if not isinstance(param, ABC) or param.L != 1:
        raise SpecError(f"param must be a one-hidden-layer tp.ABC (e.g. tp.mup(1)), got "
                        f"{param!r}")
    zero = ABC(param.a, (param.b[0], sympy.oo), param.c, param.optimizer,
               name=f"{param.label}, zero readout")
    return MLP(zero, d_in=check_int(d_in, "d_in"), d_out=check_int(d_out, "d_out"), phi="id",
               sigma=(finite_positive(sigma, "sigma"), 1.0))


def check_network(net: MLP, what: str, builder: str) -> None:
    """Refuse a network the pair does not describe, naming the builder that makes one."""
    if not isinstance(net, MLP):
        raise SpecError(f"net must be a tp.MLP (see {builder}), got {type(net).__name__}")
    if net.L != 1 or net.phi != "id" or not net.param.readout_zero_init \
            or not net.program.plain or net.init != "gaussian":
        raise SpecError(f"{what} needs one hidden layer, phi = 'id', a zero readout, Gaussian "
                        f"input weights and no biases or norms: build the network with "
                        f"{builder}")
    if net.param.optimizer != "sgd":
        raise SpecError(f"{what} trains with SGD; {net.param.label} names {net.param.optimizer}")


def rates(net: MLP, width, lr: float, limit: str = "feature") -> tuple:
    """(η_in, η_out, α) of the module docstring for base rate ``lr``."""
    if width == math.inf:
        if check_choice(limit, "limit", LIMITS) == "gp":
            return 0.0, lr * net.effective_lr_mult[1], net.output_multiplier
        const = net.limit_constants(lr)
        return const.eta[0], const.eta[1], const.alpha
    const = net.finite_constants(width, lr)
    return const.lr[0], const.lr[1], const.alpha


def initial(net: MLP, width, seed: int = 0, init=None) -> tuple:
    """(E_in, E_out, scale) at initialization: scale = 1/n (⟨u_i, u_j⟩ = scale·(E_in E_inᵀ)_ij)
    at width n, 1 in the limit; ``init`` = (W¹ᵀ, W²) of a width-n network replaces the
    seeded draw."""
    d, k = net.d_in, net.d_out
    if width == math.inf:
        return net.limit_sigma[0] * np.eye(d), np.zeros((k, d)), 1.0
    n = check_width(width)
    if init is None:
        rng = np.random.default_rng(check_int(seed, "seed", 0))
        std = net.finite_constants(n).init_std[0]
        return std * rng.standard_normal((d, n)), np.zeros((k, n)), 1.0 / n
    E_in, E_out = (np.array(a, dtype=np.float64) for a in init)
    if E_in.shape != (d, n) or E_out.shape != (k, n):
        raise SpecError(f"init must be arrays of shapes ({d}, {n}) and ({k}, {n}) (W¹ᵀ, W²), "
                        f"got {E_in.shape} and {E_out.shape}")
    return E_in, E_out, 1.0 / n


def width_label(width) -> str:
    return "∞" if width == math.inf else f"n={width}"
