"""LoRA+'s toy network with a low-rank adapter as its only trained layer, and its task
(docs/theory.md §16.3).

    f(ξ) = W_out φ((α/r) B A φ(W_in ξ)),   W_in ∈ ℝ^{n×d}, A ∈ ℝ^{r×n}, B ∈ ℝ^{n×r},
    W_out ∈ ℝ^{1×n},

W_in (entries N(0, σ_in²/d)) and W_out (entries ω_i n^{−p}, ω_i ~ N(0, σ_out²)) frozen; A
(entries N(0, σ_A²/n), or 0) and B (entries N(0, σ_B²), or 0) trained with their own rates
η_A = η̄_A n^{−c_A}, η_B = η̄_B n^{−c_B}.  ``readout='mup'`` is p = 1 (the pretrained
network in μP, as LoRA+'s analysis assumes); ``'sp'`` is p = ½, the N(0, 1/n) of LoRA+'s
experiment.  The exponents (c_A, c_B) are the classifier's maximal stable rates
(:func:`~.exponents.maximal_rates`): Adam (1, 0), SGD (1, −1) with a μP readout.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..engine.backend import numpy_backend
from ..errors import SpecError
from ..nonlinearities import get_nonlinearity
from ..spec.checks import check_choice, check_int, check_width, finite_positive
from .adapter import Adapter

_NP = numpy_backend()
#: the frozen readout's width exponent p of W_out = ω n^{−p}
READOUTS = {"mup": Fraction(1), "sp": Fraction(1, 2)}


@dataclass(frozen=True)
class LoRAToy(Adapter):
    """The toy network of the module docstring and how it is fine-tuned: the adapter's
    fields (:class:`~.adapter.Adapter`: rank, alpha, init, optimizer, sigma_A, sigma_B,
    betas, eps) and the frozen network's (d, phi, readout, sigma_in, sigma_out)."""

    d: int = 5
    phi: str = "tanh"
    readout: str = "mup"
    sigma_in: float = 1.0
    sigma_out: float = 1.0

    def __post_init__(self):
        self._check_adapter()
        object.__setattr__(self, "d", check_int(self.d, "d"))
        get_nonlinearity(self.phi)
        check_choice(self.readout, "readout", tuple(READOUTS))
        for name in ("sigma_in", "sigma_out"):
            finite_positive(getattr(self, name), name)
        self._check_saddle()

    @property
    def p(self) -> Fraction:
        return READOUTS[self.readout]

    @property
    def d_in(self) -> int:
        return self.d

    def limit_refusal(self) -> str | None:
        """Why the limit of this fine-tuning is not simulated (None: it is)."""
        if self.readout == "mup":
            return None
        return (f"readout = {self.readout!r}: the frozen readout n^(−½) amplifies a Θ(1) "
                "feature update to n^(½), so the adapter's features vanish in the stable "
                "limit (docs/theory.md §16.2); the limit is simulated for readout = 'mup'")


@dataclass(frozen=True)
class SineTask:
    """LoRA+'s toy data: ξ ~ N(0, I_d), y = sin(mean ξ); ``x`` stacks the training then the
    test inputs."""

    x: np.ndarray
    y: np.ndarray
    n_train: int

    @property
    def train(self) -> slice:
        return slice(0, self.n_train)

    @property
    def test(self) -> slice:
        return slice(self.n_train, len(self.y))


def sine_task(d: int = 5, n_train: int = 256, n_test: int = 256, seed: int = 0) -> SineTask:
    """``n_train`` + ``n_test`` draws of LoRA+'s toy task in dimension ``d``."""
    d, n_train, n_test = check_int(d, "d"), check_int(n_train, "n_train"), check_int(
        n_test, "n_test")
    x = np.random.default_rng(seed).standard_normal((n_train + n_test, d))
    return SineTask(x, np.sin(x.mean(axis=1)), n_train)


#: Gauss–Hermite nodes per dimension of the input kernel's quadrature (smooth φ)
HERMITE_NODES = 96


def input_kernel(toy: LoRAToy, x: np.ndarray) -> np.ndarray:
    """K(ξ, ξ') = E[φ(w·ξ) φ(w·ξ')], w ~ N(0, σ_in²/d I_d): the covariance of Z_A⁰/σ_A
    over the inputs (docs/theory.md §16.4).  φ's closed form where it has one (relu, erf,
    id), else a 96 × 96-node Gauss–Hermite rule on (u, v) = (√a z₁, (c/√a) z₁ + √(b − c²/a)
    z₂) (a smooth φ at pre-activation variances a, b = O(1): error below 1e-6, far below the
    Monte Carlo's)."""
    g = toy.sigma_in ** 2 / toy.d * (x @ x.T)
    nl = get_nonlinearity(toy.phi)
    if nl.gaussian_moments is not None:
        diag = np.diag(g)
        a = np.broadcast_to(diag[:, None], g.shape).ravel()
        b = np.broadcast_to(diag[None, :], g.shape).ravel()
        K = np.asarray(nl.gaussian_moments(a, b, g.ravel())[0], float).reshape(g.shape)
        return 0.5 * (K + K.T)
    z, w = np.polynomial.hermite_e.hermegauss(HERMITE_NODES)
    w = w / w.sum()
    sd = np.sqrt(np.diag(g))
    K = np.empty_like(g)
    for i in range(len(g)):                   # the row's entries m >= i; K is symmetric
        rho = g[i, i:] / np.where(sd[i] * sd[i:] > 0, sd[i] * sd[i:], 1.0)
        rest = sd[i:] * np.sqrt(np.clip(1.0 - rho ** 2, 0.0, None))
        outer = nl.phi(sd[i] * z, _NP)                                  # (k,)
        inner = nl.phi((rho * sd[i:])[:, None, None] * z[None, :, None]
                       + rest[:, None, None] * z[None, None, :], _NP)   # (m, k, k)
        K[i, i:] = K[i:, i] = np.einsum("k,mkl,l->m", w * outer, inner, w)
    return K


def kernel_root(K) -> np.ndarray:
    """A square root L Lᵀ = K of an input kernel (Z_A⁰'s law is σ_A L ε), by eigenvectors
    times the roots of the eigenvalues clipped at 0: K's round-off rank deficiency is
    tolerated."""
    vals, vecs = np.linalg.eigh(K)
    return vecs * np.sqrt(np.clip(vals, 0.0, None))


def require_toy(toy, what: str) -> LoRAToy:
    """``toy`` as a :class:`LoRAToy`, for what is built on the toy alone (``what``)."""
    if not isinstance(toy, LoRAToy):
        raise SpecError(f"{what} is built for the toy network (a LoRAToy); got "
                        f"{type(toy).__name__}: fine_tune runs a pretrained network's "
                        "adapter at a width or in the limit")
    return toy


def check_width_or_limit(width) -> int | float:
    """A width: a positive integer (spec.checks.check_width), or math.inf for the limit."""
    if width == math.inf:
        return width
    return check_width(width)
