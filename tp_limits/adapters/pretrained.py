"""A network pretrained on one task, then fine-tuned on another through a low-rank adapter on
one of its hidden matrices or its readout, at width n and in the limit (docs/theory.md §16.6).

Phase one trains a μP MLP (L ≥ 2) on its routine with the package's engines: the finite
network at width n (:func:`~tp_limits.train_finite`), or the deep Monte Carlo limit, whose
particles then carry the pretrained network.  Phase two freezes every weight and trains an
adapter on W^L,

    h^L(ξ) = W^L x^{L−1}(ξ) + (α/r) B A x^{L−1}(ξ),     f(ξ) = α_out W^{L+1} φ(h^L(ξ)).

The layers below W^L are frozen, so x^{L−1} on the fine-tuning inputs never changes, and
the only layer above is the frozen readout: phase two needs, per width-n coordinate (per
particle in the limit), three things the pretrained network fixes: x^{L−1} (what A reads),
the frozen pre-activation W^L x^{L−1} (what the adapter's output adds to) and the readout
ω = α_out n W^{L+1} (:class:`Base`).  Given them it is the toy's step (engine.py) with
that pre-activation added; in the limit Z_A⁰ = A₀ x^{L−1} is Gaussian with rows
N(0, σ_A² K), K(ξ, ξ') = E[Z^{x^{L−1}(ξ)} Z^{x^{L−1}(ξ')}], estimated on the particles.

On the readout (``layer='readout'``) the adapter is W^{L+1} + (α/r) B A with B ∈ ℝ^{1×r}:
f = f₀ + α_out (α/r) B·Z_A, Z_A = A x^L with x^L frozen and f₀ the pretrained output; B
is r numbers, deterministic in the limit, and A's columns are the particles' (LoRA+'s
linear model, its features learned in phase one).

On a lower matrix W^l (``layer='W<l>'``, 1 ≤ l < L; ``'input'`` is W^1, whose A reads the
inputs ξ and has no width) the adapter changes the input of the frozen matrices above it, W^{l+1} … W^{L+1}.  At width n they are matrices
(:class:`~.upper.FiniteUpper`); in the limit each new vector they multiply gets its hat
conditional on the pretraining's, with its Ż and ΔW terms: the deep Monte Carlo run of
phase one continues, frozen, above W^l (:class:`~.upper.DeepUpper`).  The layers below
W^l stay frozen and are never differentiated, so A₀ is only ever applied to x^{l−1}:
Z_A⁰ keeps its Gaussian law N(0, σ_A² K) given the particles.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..engine.backend import numpy_backend
from ..errors import DivergenceError, SpecError
from ..finite.train import train_finite
from ..limit.montecarlo.engine import host_settings
from ..limit.montecarlo.montecarlo import DeepRun
from ..limit.simulate import prepare_limit
from ..spec import MLP, Routine
from ..spec.checks import check_choice, check_int, check_width
from .adapter import Adapter
from .toy import kernel_root
from .upper import DeepUpper, FiniteUpper

_NP = numpy_backend()
#: the named layers of a pretrained MLP an adapter goes on; 'W<l>' names any 1 ≤ l ≤ L + 1
LAYERS = ("input", "hidden", "readout")


def layer_names(L: int) -> tuple:
    """Every ``layer`` an adapter of an MLP with L hidden layers takes: 'input' (W^1),
    'hidden' (W^L), 'readout' (W^{L+1}) and 'W1' … 'W{L+1}'."""
    return LAYERS + tuple(f"W{l}" for l in range(1, L + 2))


@dataclass(frozen=True, kw_only=True)
class PretrainedLoRA(Adapter):
    """A μP MLP ``net`` (L ≥ 2, no bias, skip or normalization, one output) pretrained on
    ``routine`` (an optimizer linear in the gradients: SGD, with momentum or weight decay),
    and the adapter (:class:`~.adapter.Adapter`'s fields) on its last hidden matrix W^L
    (``layer='hidden'``), on its readout W^{L+1} (``'readout'``), on its input layer W^1
    (``'input'``), or on any W^l (``'W<l>'``, 1 ≤ l ≤ L + 1).  One adapter per network."""

    net: MLP
    routine: Routine = field(repr=False)
    layer: str = "hidden"

    def __post_init__(self):
        self._check_adapter()
        net, routine = self.net, self.routine
        if not isinstance(net, MLP):
            raise SpecError(f"net must be a tp.MLP, got {type(net).__name__}")
        if not isinstance(routine, Routine):
            raise SpecError(f"routine must be a tp.Routine, got {type(routine).__name__}")
        if net.L < 2:
            raise SpecError(f"net has L = {net.L}: pretraining in the limit runs the deep "
                            "Monte Carlo engine, and the hidden adapter goes on W^L, an n × n "
                            "matrix only when L >= 2")
        if not net.program.plain:
            raise SpecError("net has biases, skips or a normalization: the pretrained adapter "
                            "is built for plain MLPs (the frozen pre-activation W^L x^{L−1} "
                            "would also carry them)")
        if net.d_out != 1:
            raise SpecError(f"net has d_out = {net.d_out}; the fine-tuning task has one output")
        k = net.param.classify()
        if k.regime != "feature_learning" or net.init_exponents()[net.L] < 1:
            raise SpecError(f"net's parametrization {net.param.label} is {k.regime} with a "
                            "readout of size n^-(a+b) = n^-" f"{net.init_exponents()[net.L]}: "
                            "the adapter's limit needs a feature-learning network with a μP "
                            "readout (W^{L+1} of size 1/n), e.g. tp.mup(L)")
        opt = routine.optimizer
        if opt is not None and (opt.partners or opt.pair_matrix or not opt.linear):
            raise SpecError(f"routine's optimizer is {opt}: pretraining in the limit keeps "
                            "the deep engine's particles only for optimizers linear in the "
                            "gradients (SGD, momentum, weight decay)")
        refusal = net.limit_refusal()
        if refusal:
            raise SpecError(refusal)
        if isinstance(self.layer, (tuple, list)) and len(self.layer) != 1:
            raise SpecError(
                f"layer = {self.layer!r}: one adapter per network. An adapter below another "
                "trains on backward vectors that pass through the upper one's A₀ᵀ (of size "
                "n^(-1/2) per coordinate, not μP's 1/n), so its features come to depend on "
                "A₀ and its limit needs a correction that is not derived (docs/theory.md "
                "§16.6)")
        if isinstance(self.layer, (tuple, list)):
            object.__setattr__(self, "layer", self.layer[0])
        check_choice(self.layer, "layer", layer_names(net.L))
        if self.position != "readout":          # at the readout no φ follows the adapter
            self._check_saddle()

    @property
    def matrix(self) -> int:
        """l of the adapted matrix W^l (L + 1: the readout)."""
        L = self.net.L
        named = {"input": 1, "hidden": L, "readout": L + 1}
        return named.get(self.layer) or int(self.layer[1:])

    @property
    def position(self) -> str:
        """Where the adapter sits for the classifier: 'input' (A reads the d_in inputs),
        'hidden' or 'readout'."""
        l = self.matrix
        return "input" if l == 1 else "readout" if l == self.net.L + 1 else "hidden"

    @property
    def phi(self) -> str:
        return self.net.phi

    @property
    def p(self):
        """The backward vector's size n^{−p} at the adapter's output: μP's readout
        W^{L+1} = ω/n behind a hidden adapter (p = 1); the output itself at the readout
        (p = 0)."""
        return 0 if self.position == "readout" else 1

    @property
    def d_in(self) -> int:
        return self.net.d_in

    def limit_refusal(self) -> str | None:
        """Why the limit of this fine-tuning is not simulated (None: it is)."""
        return None


@dataclass(frozen=True)
class Base:
    """The frozen network on the fine-tuning inputs, per coordinate (a width-n network) or
    particle (the limit): ``features``, the adapter's input (x^{l−1} for an adapter on
    W^l, x^L for one on the readout; (N, inputs), or the inputs ξ themselves, (d_in,
    inputs), on W^1), ``pre`` = h^l = W^l x^{l−1} (N, inputs), and the readout ``omega`` =
    α_out n W^{L+1} (N,).  On a matrix below W^L, ``upper`` is the frozen network above it
    (upper.py: matrices, or the deep limit's run) and ``omega`` is None."""

    width: float
    features: np.ndarray
    pre: np.ndarray
    omega: np.ndarray | None
    upper: object = None

    @property
    def N(self) -> int:
        """Coordinates (particles) of the width-n side."""
        return self.pre.shape[0]

    def output(self, phi) -> np.ndarray:
        """The pretrained network's output on the inputs: Σ_i W^{L+1}_i φ(h^L_i) = mean over
        coordinates of ω φ(h^L), or the frozen layers above h^l."""
        if self.upper is not None:
            return self.upper.output(self.pre)
        return phi.phi(self.pre, _NP).T @ self.omega / self.N

    def kernel(self) -> np.ndarray:
        """K(ξ, ξ') = mean over coordinates of the features' x(ξ) x(ξ'): the covariance of
        Z_A⁰/σ_A over the inputs (exact for the network, an estimate on particles; on W^1
        the exact ξ·ξ′/d_in)."""
        return self.features.T @ self.features / len(self.features)

    @cached_property
    def kernel_root(self) -> np.ndarray:
        """:func:`~.toy.kernel_root` of :meth:`kernel`, computed once per base: every seed and
        rate pair that shares this base draws Z_A⁰ from it."""
        return kernel_root(self.kernel())


def pretrain(pre: PretrainedLoRA, x, width, seed: int = 0, particles: int = 16384) -> Base:
    """Phase one: ``pre.net`` trained on ``pre.routine`` at width ``width`` (seed ``seed``)
    or in the limit (``width=math.inf``: the deep Monte Carlo engine on ``particles``
    particles, one replicate, random stream ``seed``), returned as its :class:`Base` on the
    inputs ``x`` (inputs × d_in).  A divergence of the pretraining is raised
    (:class:`~tp_limits.DivergenceError`); Ctrl-C is passed on, since a network trained part
    way is not the pretrained network."""
    x = np.asarray(x, float)
    net = pre.net
    if x.ndim != 2 or x.shape[1] != net.d_in:
        raise SpecError(f"x has shape {x.shape}; it must be (inputs, d_in = {net.d_in})")
    if width == math.inf:
        return _pretrain_limit(pre, x, seed, check_int(particles, "particles"))
    width = check_width(width)
    try:
        traj = train_finite(net, pre.routine, width, seed=seed, keep_weights=True, record=())
    except DivergenceError as exc:
        raise DivergenceError(exc.step, exc.layer, exc.quantity,
                              f"while pretraining at width {width}, seed {seed}",
                              exc.size) from None
    if traj.status.interrupted:
        raise KeyboardInterrupt
    W = traj.weights.final
    phi, b = net.nonlinearity, _NP
    hs = [W[0] @ x.T]                                     # (n, inputs): h^1 … h^L
    for l in range(1, net.L):
        hs.append(W[l] @ phi.phi(hs[-1], b))
    return _base(pre, width, x, hs, lambda h: phi.phi(h, b),
                 net.output_multiplier * width * W[net.L][0],
                 lambda: FiniteUpper(W[pre.matrix:], phi, net.output_multiplier))


def _base(pre: PretrainedLoRA, width, x, hs, phi, omega, upper) -> Base:
    """The :class:`Base` of the adapted matrix W^l from the inputs x, h^1 … h^L (each
    N × inputs) and the readout ω = α_out n W^{L+1} (N,); ``upper()`` makes the frozen
    network above W^l."""
    net, l = pre.net, pre.matrix
    if l == net.L + 1:
        return Base(width, np.ascontiguousarray(phi(hs[-1])), np.ascontiguousarray(hs[-1]),
                    omega)
    feats = np.ascontiguousarray(x.T if l == 1 else phi(hs[l - 2]))      # x^{l−1}
    pre_l = np.ascontiguousarray(hs[l - 1])                # h^l
    if l == net.L:
        return Base(width, feats, pre_l, omega)
    return Base(width, feats, pre_l, None, upper())


def _pretrain_limit(pre: PretrainedLoRA, x, seed: int, N: int) -> Base:
    """The deep Monte Carlo run of phase one, then one forward pass of the fine-tuning
    inputs under W_T: their hats drawn jointly, conditional on the stored ones.  An
    adapter below W^L keeps the run: the frozen layers above it continue in it."""
    net = pre.net
    plan = prepare_limit(net, pre.routine, particles=N, seed=seed, replicates=1,
                         method="monte_carlo", record=())
    spec = plan.engine.spec
    run = DeepRun(spec, np.random.default_rng(seed))
    with host_settings(spec):
        res = run.run(lambda t: None)
        if res.interrupted:
            raise KeyboardInterrupt
        if res.diverged:
            d = res.diverged
            raise DivergenceError(d.step, d.layer, d.quantity, "while pretraining in the limit",
                                  float("inf") if d.size is None else d.size)
        T = spec.problem.T
        hs, _, _, _ = run.forward(run.xp.asarray(x), stored=0, t=T)
    to = run.b.to_numpy
    return _base(pre, math.inf, x, [to(h).T for h in hs],
                 lambda h: net.nonlinearity.phi(h, _NP), run.alpha * to(run.ZV)[:, 0],
                 lambda: DeepUpper(run, pre.matrix))
