"""Fine-tuning the toy network's adapter at width n and in the limit: one particle system
(docs/theory.md §16.4).

With the frozen input layer the width-n coordinates i carry (h_i(ξ) = φ(w_i·ξ) over the
inputs, ω_i, B_i ∈ ℝ^r, the column ΔA_{:,i} ∈ ℝ^r of A's update), and the step is

    Z_A(ξ) = Z_A⁰(ξ) + Σ_i ΔA_{:,i} h_i(ξ),     v_i = (α/r) B_i·Z_A,    f = Σ_i W_out,i φ(v_i)
    δv_i = χ W_out,i φ′(v_i),   ∂B_i = (α/r) Σ_ξ δv_i Z_A,   δZ_A = (α/r) Σ_i δv_i B_i,
    ∂A_{:,i} = Σ_ξ δZ_A h_i(ξ),

with χ = (f − y)/|batch| (full batch), SGD or Adam on A and B with their own rates.  A
width-n network is this system with n coordinates and its own Z_A⁰ = A₀ h.  In μP
(W_out = ω/n, η_A = η̄_A/n, η_B = η̄_B n^{−c_B}) every sum over i is n times a mean whose
terms depend on coordinate i alone, so as n → ∞ it becomes an expectation over the
particle law, and only Z_A⁰ = A₀ h stays random: a Gaussian r × (inputs) matrix with rows
iid N(0, σ_A² K), K(ξ, ξ') = E[φ(w·ξ) φ(w·ξ')] (the central limit theorem; A₀ is
independent of everything else).  So the limit is simulated by the same step on N
particles with Z_A⁰ drawn from that law (:func:`fine_tune` at ``width=math.inf``), and
its mean over Z_A⁰ by independent replicates; given Z_A⁰ (``z_a0``) the limit is
deterministic (the conditional limit) unless Adam normalizes a vanishing gradient: with
B₀ ≠ 0 the first step's A-gradient is an O(n^{−1/2}) fluctuation that Adam turns into
Θ(1) signs, a second random input the replicates then also average over.

A pretrained network's adapter on W^L (pretrained.py, docs/theory.md §16.6) is the same
system with h = x^{L−1}, ω = α n W^{L+1} and the frozen pre-activation added,
v_i = (W^L x^{L−1})_i + (α/r) B_i·Z_A.  On a lower W^l, h = x^{l−1} (the inputs ξ on W^1,
where A has no width) and f and δv come from the frozen layers above (upper.py).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..engine.backend import numpy_backend
from ..engine.memory import require_memory, usable_bytes
from ..engine.progress import progress_bar
from ..errors import DivergenceError, SpecError
from ..nonlinearities import get_nonlinearity
from ..spec.checks import check_int, finite_non_negative
from ..spec.optimizers.adam import AdamHyper, _adam
from .pretrained import Base, PretrainedLoRA, pretrain
from .toy import LoRAToy, SineTask, check_width_or_limit, input_kernel, kernel_root

_NP = numpy_backend()
#: the limit's default particle count
DEFAULT_PARTICLES = 16384


@dataclass(frozen=True)
class LoRARun:
    """Seeds (or the limit's replicates) of one fine-tuning run.

    ``train_loss`` and ``test_loss`` (S, T + 1): ½ mean (f − y)² before each step and
    after the last; ``f_test`` (S, n_test) the final test outputs; ``z_a0`` (S, r, inputs)
    the initial Z_A⁰ = A₀ h; ``diverged`` (S,) the step at which a run's numbers stopped
    being finite (−1: never), whose later losses are inf; ``divergence`` says where;
    ``interrupted``: Ctrl-C stopped the run, which holds the seeds that had finished."""

    width: float
    eta_A: float
    eta_B: float
    train_loss: np.ndarray
    test_loss: np.ndarray
    f_test: np.ndarray
    z_a0: np.ndarray
    diverged: np.ndarray
    divergence: tuple
    interrupted: bool = False

    @classmethod
    def stack(cls, width, eta_A, eta_B, runs, interrupted: bool = False) -> "LoRARun":
        """The run of per-seed tuples (train loss, test loss, f_test, Z_A⁰, diverged,
        divergence), in seed order."""
        tr, te, f, za, div, why = zip(*runs)
        return cls(width, eta_A, eta_B, np.array(tr), np.array(te), np.array(f),
                   np.array(za), np.array(div), tuple(why), interrupted)

    @property
    def seeds(self) -> int:
        return len(self.train_loss)

    def final(self, which: str = "test") -> np.ndarray:
        """Each seed's final loss (``which`` 'test' or 'train')."""
        return (self.test_loss if which == "test" else self.train_loss)[:, -1]

    def mean_se(self, which: str = "test") -> tuple:
        """(mean, standard error, degrees of freedom) of the final loss over the seeds."""
        x = self.final(which)
        dof = len(x) - 1
        se = float(np.std(x, ddof=1) / math.sqrt(len(x))) if dof > 0 else math.nan
        return float(np.mean(x)), se, dof


def _adam_step(w, g, m, v, t, lr, betas, eps):
    """Adam's coordinate rule of the package's optimizers (spec/optimizers/adam.py) at
    update count t, without weight decay; returns (w, m, v)."""
    b1, b2 = betas
    return _adam(w, g, m, v, AdamHyper(b1, b2, eps, 1.0 - b1 ** t, 1.0 - b2 ** t, lr, 0.0))


def _finite(name: str, x, t: int):
    """A NaN or ±inf anywhere in ``x`` makes its sum non-finite: one reduction, no mask."""
    if not math.isfinite(float(np.sum(x))):
        if np.all(np.isfinite(x)):                   # the sum itself overflowed: still huge
            return f"step {t}: {name} overflows (entries near 1e308)"
        return f"step {t}: {name} is not finite"
    return None


def _dphi(phi, v, z):
    """φ′(v), from the value z = φ(v) where φ allows it (tanh: 1 − z², no second tanh)."""
    return phi.dphi_of_value(z) if phi.dphi_of_value is not None else phi.dphi(v, _NP)


class _HiddenHead:
    """The adapter on a hidden matrix: v_i = p_i + (α/r) B_i·Z_A (p the frozen
    pre-activation, or 0), f = Σ_i W_out,i φ(v_i), W_out = ω N^{−p}; its backward pass gives
    δZ_A = (α/r) Σ_i δv_i B_i and ∂B_i = (α/r) Σ_ξ δv_i Z_A."""

    def __init__(self, toy, h, omega, pre):
        self.phi, self.s, self.pre = get_nonlinearity(toy.phi), toy.scale, pre
        self.w_out = omega * len(omega) ** -float(toy.p)
        self.v = self.z = None

    def forward(self, za, B):
        v = self.s * (B @ za)
        if self.pre is not None:
            v += self.pre
        self.v, self.z = v, self.phi.phi(v, _NP)
        return self.z.T @ self.w_out

    def check(self, t: int):
        return _finite("the adapter's output v", self.v, t)

    def delta_v(self, chi, tr):
        """δv_i = χ W_out,i φ′(v_i) on the training inputs ``tr``."""
        return (self.w_out[:, None] * _dphi(self.phi, self.v[:, tr], self.z[:, tr])) * chi[None, :]

    def backward(self, B, za, chi, tr):
        dv = self.delta_v(chi, tr)
        return self.s * (B.T @ dv), self.s * (dv @ za[:, tr].T)


class _UpperHead(_HiddenHead):
    """The adapter on a hidden matrix W^l below W^L: v = p + (α/r) B Z_A as in
    :class:`_HiddenHead`, then the frozen layers above (upper.py), which keep the training
    inputs' vectors (the task's first n_train inputs) in the limit; δv is what they
    return."""

    def __init__(self, toy, upper, pre, n_train: int):
        self.s, self.pre, self.upper, self.n_train = toy.scale, pre, upper, n_train
        self.v, self.failed = None, None

    def forward(self, za, B):
        self.v = self.s * (B @ za) + self.pre
        try:
            return self.upper.forward(self.v, self.n_train)
        except DivergenceError as exc:            # a hat's law is not finite any more
            self.failed = f"the frozen layer {exc.layer}'s {exc.quantity}"
            return np.full(self.v.shape[1], np.nan)

    def check(self, t: int):
        if self.failed:
            return f"step {t}: {self.failed} is not finite"
        return super().check(t)

    def delta_v(self, chi, tr):
        """δv from the frozen layers above, for the training inputs their forward pass put
        first."""
        return self.upper.backward(chi)


class _ReadoutHead:
    """The adapter on the readout (docs/theory.md §16.6): f = f₀ + α_out (α/r) B·Z_A with
    B ∈ ℝ^{1×r} and f₀ = mean over coordinates of ω x^L the frozen network's output;
    δZ_A = α_out (α/r) Bᵀ χ and ∂B = α_out (α/r) Σ_ξ χ Z_Aᵀ."""

    def __init__(self, toy, h, omega, pre):
        self.f0 = h.T @ omega / len(omega)
        self.c = toy.net.output_multiplier * toy.scale
        self.v = None

    def forward(self, za, B):
        return self.f0 + self.c * (B @ za)[0]

    def check(self, t: int):
        return None

    def backward(self, B, za, chi, tr):
        return self.c * (B.T @ chi[None, :]), self.c * (chi[None, :] @ za[:, tr].T)


def _one(toy, task: SineTask, h, omega, B, za0, width, lr_A, lr_B, steps, tick,
         watch=None, pre=None, upper=None):
    """One run of the module docstring's step on the coordinates (h, ω, B₀) with Z_A⁰
    (and the frozen pre-activation ``pre`` of a pretrained network's hidden adapter, and
    the frozen layers ``upper`` above it when it is below W^L);
    ``watch(t, Z_A, v, f, B)``, if given, sees every forward pass t = 0..steps."""
    if upper is not None:
        head = _UpperHead(toy, upper, pre, task.n_train)
    else:
        head = (_ReadoutHead if toy.position == "readout" else _HiddenHead)(toy, h, omega,
                                                                           pre)
    N = h.shape[0]
    eps_A, eps_B = toy.eps_scales(width)
    dA = np.zeros((toy.rank, N))
    B = B.copy()
    adam = toy.optimizer == "adam"
    if adam:
        mA, vA, mB, vB = (np.zeros_like(dA), np.zeros_like(dA), np.zeros_like(B),
                          np.zeros_like(B))
    tr, te, y = task.train, task.test, task.y
    n_tr = task.n_train
    loss_tr = np.full(steps + 1, np.inf)
    loss_te = np.full(steps + 1, np.inf)
    for t in range(steps + 1):
        za = za0 + dA @ h
        f = head.forward(za, B)
        where = _finite("Z_A = A h", za, t) or head.check(t) or _finite("f", f, t)
        if where:
            return loss_tr, loss_te, f[te], t, where
        r = f - y
        losses = 0.5 * np.mean(r[tr] ** 2), 0.5 * np.mean(r[te] ** 2)
        where = _finite("the loss", losses, t)
        if where:
            return loss_tr, loss_te, f[te], t, where
        loss_tr[t], loss_te[t] = losses
        if watch is not None:
            watch(t, za, head.v, f, B.copy())
        if t == steps:
            break
        dza, gB = head.backward(B, za, r[tr] / n_tr, tr)
        gA = dza @ h[:, tr].T
        if adam:
            dA, mA, vA = _adam_step(dA, gA, mA, vA, t + 1, lr_A, toy.betas, eps_A)
            B, mB, vB = _adam_step(B, gB, mB, vB, t + 1, lr_B, toy.betas, eps_B)
        else:
            dA -= lr_A * gA
            B -= lr_B * gB
        tick(t)
    return loss_tr, loss_te, f[te], -1, None


def _draw(toy: LoRAToy, task: SineTask, N: int, rng, kernel_chol=None):
    """(h, ω, B₀, Z_A⁰) of N coordinates of the toy: Z_A⁰ = A₀ h for a network
    (``kernel_chol`` None), else drawn from its limiting law N(0, σ_A² K) per row."""
    phi = get_nonlinearity(toy.phi)
    w = toy.sigma_in / math.sqrt(toy.d) * rng.standard_normal((N, toy.d))
    h = phi.phi(w @ task.x.T, _NP)
    omega = toy.sigma_out * rng.standard_normal(N)
    return (h, omega) + _adapter_draw(toy, h, rng, kernel_chol)


def _adapter_draw(toy, h, rng, kernel_chol=None, width=None):
    """(B₀, Z_A⁰) of the adapter whose features A reads are h (fan-in × inputs: the N
    coordinates, or on W^1 the inputs ξ), on ``width`` coordinates (default: h's N): Z_A⁰ =
    A₀ h with A₀'s entries N(0, σ_A²/fan-in) (``kernel_chol`` None), or drawn from its law
    (the limit)."""
    N, inputs = h.shape
    rows = 1 if toy.position == "readout" else width or N   # B's fan-out: d_out = 1, or n
    B = (toy.sigma_B * rng.standard_normal((rows, toy.rank)) if toy.init != "zero_B"
         else np.zeros((rows, toy.rank)))
    if toy.init == "zero_A":
        za0 = np.zeros((toy.rank, inputs))
    elif kernel_chol is None:
        A0 = toy.sigma_A / math.sqrt(N) * rng.standard_normal((toy.rank, N))
        za0 = A0 @ h
    else:
        za0 = law_draw(toy, kernel_chol, rng)
    return B, za0


def law_draw(toy: LoRAToy, kernel_chol, rng) -> np.ndarray:
    """Z_A⁰ from its limiting law: r rows iid N(0, σ_A² K), K = L Lᵀ (``kernel_chol``)."""
    return toy.sigma_A * (kernel_chol @ rng.standard_normal((len(kernel_chol), toy.rank))).T


def given_z_a0(toy: LoRAToy, z_a0, inputs: int) -> np.ndarray:
    """A Z_A⁰ passed in (the conditional limit), checked to be (rank, inputs)."""
    z_a0 = np.asarray(z_a0, float)
    if z_a0.shape != (toy.rank, inputs):
        raise SpecError(f"z_a0 has shape {z_a0.shape}; it must be (rank, inputs) = "
                        f"({toy.rank}, {inputs})")
    return z_a0


def _bytes(toy, N: int, inputs: int) -> float:
    """What one run holds: h, v, φ(v) and φ′ over (N × inputs) (and a pretrained
    network's frozen pre-activation), the r-columns of B, ΔA and their Adam moments, and
    the input kernel with its square root."""
    per_input = 5 if isinstance(toy, PretrainedLoRA) else 4
    return 8.0 * (per_input * N * inputs + 8 * N * toy.rank + 2 * inputs * inputs)


def _require_memory(toy, N: int, inputs: int, what: str) -> None:
    per = _bytes(toy, 2, inputs) - _bytes(toy, 1, inputs)
    fits = int((usable_bytes() - _bytes(toy, 0, inputs)) // per)
    require_memory(_bytes(toy, N, inputs), f"fine-tuning at {N} {what} on {inputs} inputs",
                   largest=f"at most about {max(fits, 0)} {what} fit")


def _require_upper_memory(toy, N: int, rows: int) -> None:
    """The rows the frozen layers above a lower adapter store in the limit: per layer
    W^{l+1} … W^L a forward and a backward family, each a vector and its hat per row."""
    per_row = 8.0 * 2 * 2 * (toy.net.L - toy.matrix) * N
    require_memory(per_row * rows, f"the frozen layers above W^{toy.matrix}: {rows} more rows "
                   f"of {N} particles in each of their {2 * (toy.net.L - toy.matrix)} hat "
                   "families", largest=f"at most about {int(usable_bytes() // per_row)} rows "
                   "(n_train × (steps + 1)) fit")


def _pretrained_one(pre, task: SineTask, width, seed: int, s: int, particles: int):
    """Network (or replicate) ``s``'s pretraining: its seed one integer from the run's seed,
    s and the width (0 for the limit), apart from the adapter's stream."""
    state = np.random.SeedSequence([seed, s, 0 if width == math.inf else width, 2])
    return pretrain(pre, task.x, width, int(state.generate_state(1)[0]), particles=particles)


def _check_base(base, width, inputs: int):
    """A pretrained network's :class:`~.pretrained.Base` passed as ``frozen``: of this
    width, on the task's inputs."""
    if not isinstance(base, Base):
        raise SpecError(f"frozen must be a tp.adapters.pretrain(...) result for a "
                        f"PretrainedLoRA, got {type(base).__name__}")
    if base.width != width:
        raise SpecError(f"frozen is a base of width {base.width}, the run of width {width}")
    if base.pre.shape[1] != inputs:
        raise SpecError(f"frozen holds {base.pre.shape[1]} inputs, the task {inputs}")
    return base


def _check_bases(frozen, width, inputs: int, seeds: int) -> tuple:
    """One checked base per seed: ``frozen`` a base for all, or a sequence of ``seeds``."""
    if isinstance(frozen, Base):
        return (_check_base(frozen, width, inputs),) * seeds
    if not isinstance(frozen, (list, tuple)) or len(frozen) != seeds:
        raise SpecError(f"frozen must be a pretrain(...) result or a sequence of seeds = "
                        f"{seeds} of them, got {type(frozen).__name__}"
                        + (f" of {len(frozen)}" if isinstance(frozen, (list, tuple)) else ""))
    bases = tuple(_check_base(b, width, inputs) for b in frozen)
    if len({b.N for b in bases}) > 1:
        raise SpecError("frozen's bases hold different particle counts; one run uses one")
    return bases


def pretrained_bases(pre, task: SineTask, width, seeds: int, seed: int = 0,
                     particles: int = DEFAULT_PARTICLES) -> tuple:
    """The ``seeds`` pretrained networks (particle sets at ``width=math.inf``) that
    :func:`fine_tune` would pretrain for ``seed``, to be passed as its ``frozen`` to every
    run that shares them (a sweep over rates: one pretraining per width and seed)."""
    width = check_width_or_limit(width)
    seeds = check_int(seeds, "seeds")
    N = check_int(particles, "particles") if width == math.inf else width
    require_memory(8.0 * 3 * seeds * N * len(task.y),
                   f"{seeds} pretrained {'particle sets' if width == math.inf else 'networks'} "
                   f"of {N} on {len(task.y)} inputs (features, pre-activations, readout)")
    return tuple(_pretrained_one(pre, task, width, seed, s, particles) for s in range(seeds))


def _check_kernel(kernel, inputs: int) -> np.ndarray:
    """A toy's input kernel passed as ``frozen``: an (inputs × inputs) matrix."""
    if isinstance(kernel, Base):
        raise SpecError("frozen is a pretrained network's base; a LoRAToy draws its own "
                        "frozen layers and takes its input_kernel(toy, task.x)")
    kernel = np.asarray(kernel, float)
    if kernel.shape != (inputs, inputs):
        raise SpecError(f"frozen has shape {kernel.shape}; the toy's input kernel is "
                        f"(inputs, inputs) = ({inputs}, {inputs})")
    return kernel


def fine_tune(toy, task: SineTask, width, eta_A: float, eta_B: float,
              steps: int = 100, seeds=4, seed: int = 0, particles: int = DEFAULT_PARTICLES,
              z_a0=None, frozen=None, progress: bool = False) -> LoRARun:
    """Fine-tune the adapter of ``toy`` on ``task`` with full-batch steps.

    ``toy`` a :class:`~.toy.LoRAToy`, or a :class:`~.pretrained.PretrainedLoRA`: each seed
    then first pretrains its network (or, in the limit, its particles) on the routine
    (:func:`~.pretrained.pretrain`).

    ``width`` an integer n: ``seeds`` networks, with the rates (η_A, η_B) = (``eta_A``,
    ``eta_B``) as given.  ``width=math.inf``: ``seeds`` replicates of the limit on
    ``particles`` particles, with the width-free (η̄_A, η̄_B) = (``eta_A``, ``eta_B``) and
    Z_A⁰ drawn from its law, or fixed to ``z_a0`` (r × inputs, e.g. a network's
    ``LoRARun.z_a0[k]``: the conditional limit).  The limit needs the μP readout.

    ``frozen``: what the frozen network gives every seed, if already computed — for a
    LoRAToy the task's :func:`~.toy.input_kernel` (the law of Z_A⁰; it saves the
    quadrature, seconds for hundreds of inputs and a φ without closed form), for a
    PretrainedLoRA a :func:`~.pretrained.pretrain` result of this width (one pretrained
    network, or particle set, for every seed) or a sequence of ``seeds`` of them (one each:
    a sweep pretrains its networks once for all its rates, :func:`pretrained_bases`).
    """
    width = check_width_or_limit(width)
    steps = check_int(steps, "steps")
    seeds = check_int(seeds, "seeds")
    eta_A = finite_non_negative(eta_A, "eta_A")
    eta_B = finite_non_negative(eta_B, "eta_B")
    pretrained = isinstance(toy, PretrainedLoRA)
    if not (pretrained or isinstance(toy, LoRAToy)):
        raise SpecError(f"toy must be a LoRAToy or a PretrainedLoRA, got {toy!r:.80}")
    if not isinstance(task, SineTask) or task.x.shape[1] != toy.d_in:
        raise SpecError(f"task must be a sine_task(d={toy.d_in}, ...) (the network's input "
                        f"dimension), got {task!r:.80}")
    limit = width == math.inf
    why = toy.limit_refusal() if limit else None
    if why:
        raise SpecError(why)
    inputs = len(task.y)
    bases = (_check_bases(frozen, width, inputs, seeds) if pretrained and frozen is not None
             else None)
    N = (bases[0].N if bases is not None else check_int(particles, "particles")) if limit \
        else width
    _require_memory(toy, N, inputs, "particles" if limit else "width")
    if limit and pretrained and toy.matrix < toy.net.L:
        _require_upper_memory(toy, N, task.n_train * (steps + 1))
    lr_A, lr_B = toy.rates(N, eta_A, eta_B) if limit else (eta_A, eta_B)
    chol = None
    if limit and z_a0 is None and not pretrained:
        chol = kernel_root(input_kernel(toy, task.x) if frozen is None
                           else _check_kernel(frozen, inputs))
    elif limit and z_a0 is not None:
        z_a0 = given_z_a0(toy, z_a0, inputs)
    runs = []
    with progress_bar(progress, seeds * steps,
                      f"LoRA {'limit' if limit else f'n = {width}'}") as tick:
        for s in range(seeds):
            try:
                rng = np.random.default_rng([seed, s, 0 if limit else width])
                if pretrained:
                    b = (bases[s] if bases is not None
                         else _pretrained_one(toy, task, width, seed, s, N))
                    h, omega, pre, upper = b.features, b.omega, b.pre, b.upper
                    if upper is not None:       # its families' rows: n_train per forward
                        upper.begin(np.random.default_rng([seed, s, 0 if limit else width, 1]),
                                    task.n_train * (steps + 1))
                    law = (b.kernel_root if limit and z_a0 is None
                           and toy.init != "zero_A" else None)
                    B, za0 = _adapter_draw(toy, h, rng, law, b.N)
                else:
                    (h, omega, B, za0), pre, upper = _draw(toy, task, N, rng, chol), None, None
                if z_a0 is not None:
                    za0 = z_a0
                with np.errstate(over="ignore", invalid="ignore"):   # reported as divergence
                    tr, te, f, div, why = _one(toy, task, h, omega, B, za0, N, lr_A, lr_B,
                                               steps, tick, pre=pre, upper=upper)
            except KeyboardInterrupt:
                if not runs:
                    raise
                warnings.warn(f"interrupted: {len(runs)} of {seeds} seeds finished; the run "
                              "holds those (LoRARun.interrupted)", stacklevel=2)
                return LoRARun.stack(width, eta_A, eta_B, runs, interrupted=True)
            runs.append((tr, te, f, za0, div, why))
    return LoRARun.stack(width, eta_A, eta_B, runs)
