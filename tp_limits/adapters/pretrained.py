"""A network pretrained on one task, then fine-tuned on another through a low-rank adapter on
its last hidden matrix, at width n and in the limit (docs/theory.md §16.6).

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

An adapter on a lower matrix would change the input of a pretrained matrix above it, whose limit
needs that matrix's Gaussian history (the deep engine's hat families) during phase two:
not built, and refused.
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
from ..spec.checks import check_choice, check_int
from .adapter import Adapter
from .toy import kernel_root

_NP = numpy_backend()
#: the layers of a pretrained MLP an adapter goes on
LAYERS = ("hidden", "readout")


@dataclass(frozen=True, kw_only=True)
class PretrainedLoRA(Adapter):
    """A μP MLP ``net`` (L ≥ 2, no bias, skip or normalization, one output) pretrained on
    ``routine`` (an optimizer linear in the gradients: SGD, with momentum or weight decay),
    and the adapter (:class:`~.adapter.Adapter`'s fields) on its last hidden matrix W^L
    (``layer='hidden'``) or on its readout W^{L+1} (``'readout'``)."""

    net: MLP
    routine: Routine = field(repr=False)
    layer: str = "hidden"

    def __post_init__(self):
        self._check_adapter()
        check_choice(self.layer, "layer", LAYERS)
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
        if self.layer == "hidden":          # at the readout no φ follows the adapter
            self._check_saddle()

    @property
    def position(self) -> str:
        return self.layer

    @property
    def phi(self) -> str:
        return self.net.phi

    @property
    def p(self):
        """The backward vector's size n^{−p} at the adapter's output: μP's readout
        W^{L+1} = ω/n behind a hidden adapter (p = 1); the output itself at the readout
        (p = 0)."""
        return 1 if self.layer == "hidden" else 0

    @property
    def d_in(self) -> int:
        return self.net.d_in

    def limit_refusal(self) -> str | None:
        """Why the limit of this fine-tuning is not simulated (None: it is)."""
        return None


@dataclass(frozen=True)
class Base:
    """The frozen network on the fine-tuning inputs, per coordinate (a width-n network) or
    particle (the limit): ``features``, the adapter's input (x^{L−1} for a hidden adapter,
    x^L for one on the readout), and ``pre`` = h^L = W^L x^{L−1}, both (N, inputs), and the
    readout ``omega`` = α_out n W^{L+1} (N,).  mean(ω φ(pre)) is the pretrained network's
    output."""

    width: float
    features: np.ndarray
    pre: np.ndarray
    omega: np.ndarray

    @property
    def N(self) -> int:
        return len(self.omega)

    def output(self, phi) -> np.ndarray:
        """f(ξ) = Σ_i W^{L+1}_i φ(h_i) = mean over coordinates of ω φ(h)."""
        return phi.phi(self.pre, _NP).T @ self.omega / self.N

    def kernel(self) -> np.ndarray:
        """K(ξ, ξ') = mean over coordinates of the features' x(ξ) x(ξ'): the covariance of
        Z_A⁰/σ_A over the inputs (exact for the network, an estimate on particles)."""
        return self.features.T @ self.features / self.N

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
    width = check_int(width, "width")
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
    h = W[0] @ x.T                                        # (n, inputs): h^1
    for l in range(1, net.L):
        below, h = h, W[l] @ phi.phi(h, b)                # h^{L−1}, h^L at the end
    feats = phi.phi(h if pre.layer == "readout" else below, b)
    return Base(width, feats, h, net.output_multiplier * width * W[net.L][0])


def _pretrain_limit(pre: PretrainedLoRA, x, seed: int, N: int) -> Base:
    """The deep Monte Carlo run of phase one, then one forward pass of the fine-tuning
    inputs under W_T: their hats drawn jointly, conditional on the stored ones."""
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
        hs, xs, _, _ = run.forward(run.xp.asarray(x), stored=0, t=T)
    to = run.b.to_numpy
    # the adapter's input x^{L−1} or x^L: forward's xs are x^1..x^L
    feats = to(xs[net.L - (2 if pre.layer == "hidden" else 1)]).T
    return Base(math.inf, np.ascontiguousarray(feats), np.ascontiguousarray(to(hs[-1]).T),
                run.alpha * to(run.ZV)[:, 0])
