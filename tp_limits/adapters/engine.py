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
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..engine.backend import numpy_backend
from ..engine.memory import require_memory, usable_bytes
from ..engine.progress import progress_bar
from ..errors import SpecError
from ..nonlinearities import get_nonlinearity
from ..spec.checks import check_int, finite_non_negative
from ..spec.optimizers.adam import AdamHyper, _adam
from .toy import LoRAToy, SineTask, check_width, input_kernel

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


def _forward(toy, phi, h, w_out, B, za0, dA):
    """(Z_A, v, φ(v), f) on every input."""
    za = za0 + dA @ h
    v = toy.scale * (B @ za)
    z = phi.phi(v, _NP)
    return za, v, z, z.T @ w_out


def _dphi(phi, v, z):
    """φ′(v), from the value z = φ(v) where φ allows it (tanh: 1 − z², no second tanh)."""
    return phi.dphi_of_value(z) if phi.dphi_of_value is not None else phi.dphi(v, _NP)


def _one(toy: LoRAToy, task: SineTask, h, omega, B, za0, width, lr_A, lr_B, steps, tick,
         watch=None):
    """One run of the module docstring's step on the coordinates (h, ω, B₀) with Z_A⁰;
    ``watch(t, Z_A, v, f, B)``, if given, sees every forward pass t = 0..steps."""
    phi = get_nonlinearity(toy.phi)
    N = h.shape[0]
    w_out = omega * N ** -float(toy.p)
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
        za, v, z, f = _forward(toy, phi, h, w_out, B, za0, dA)
        where = (_finite("Z_A = A h", za, t) or _finite("the adapter's output v", v, t)
                 or _finite("f", f, t))
        if where:
            return loss_tr, loss_te, f[te], t, where
        r = f - y
        losses = 0.5 * np.mean(r[tr] ** 2), 0.5 * np.mean(r[te] ** 2)
        where = _finite("the loss", losses, t)
        if where:
            return loss_tr, loss_te, f[te], t, where
        loss_tr[t], loss_te[t] = losses
        if watch is not None:
            watch(t, za, v, f, B.copy())
        if t == steps:
            break
        chi = r[tr] / n_tr
        dv = (w_out[:, None] * _dphi(phi, v[:, tr], z[:, tr])) * chi[None, :]
        gB = toy.scale * (dv @ za[:, tr].T)
        dza = toy.scale * (B.T @ dv)
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
    """(h, ω, B₀, Z_A⁰) of N coordinates: Z_A⁰ = A₀ h for a network (``kernel_chol`` None),
    else drawn from its limiting law N(0, σ_A² K) per row."""
    phi = get_nonlinearity(toy.phi)
    w = toy.sigma_in / math.sqrt(toy.d) * rng.standard_normal((N, toy.d))
    h = phi.phi(w @ task.x.T, _NP)
    omega = toy.sigma_out * rng.standard_normal(N)
    B = (toy.sigma_B * rng.standard_normal((N, toy.rank)) if toy.init != "zero_B"
         else np.zeros((N, toy.rank)))
    if toy.init == "zero_A":
        za0 = np.zeros((toy.rank, len(task.y)))
    elif kernel_chol is None:
        A0 = toy.sigma_A / math.sqrt(N) * rng.standard_normal((toy.rank, N))
        za0 = A0 @ h
    else:
        za0 = law_draw(toy, kernel_chol, rng)
    return h, omega, B, za0


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


def _chol(K):
    """A square root L L^T = K that tolerates K's round-off rank deficiency."""
    vals, vecs = np.linalg.eigh(K)
    return vecs * np.sqrt(np.clip(vals, 0.0, None))


def _bytes(toy: LoRAToy, N: int, inputs: int) -> float:
    """What one run holds: h, v, φ(v) and φ′ over (N × inputs), the r-columns of B, ΔA and
    their Adam moments, and the input kernel with its square root."""
    return 8.0 * (4 * N * inputs + 8 * N * toy.rank + 2 * inputs * inputs)


def _require_memory(toy: LoRAToy, N: int, inputs: int, what: str) -> None:
    per = _bytes(toy, 2, inputs) - _bytes(toy, 1, inputs)
    fits = int((usable_bytes() - _bytes(toy, 0, inputs)) // per)
    require_memory(_bytes(toy, N, inputs), f"fine-tuning at {N} {what} on {inputs} inputs",
                   largest=f"at most about {max(fits, 0)} {what} fit")


def fine_tune(toy: LoRAToy, task: SineTask, width, eta_A: float, eta_B: float,
              steps: int = 100, seeds=4, seed: int = 0, particles: int = DEFAULT_PARTICLES,
              z_a0=None, kernel=None, progress: bool = False) -> LoRARun:
    """Fine-tune the adapter of ``toy`` on ``task`` with full-batch steps.

    ``width`` an integer n: ``seeds`` networks, with the rates (η_A, η_B) = (``eta_A``,
    ``eta_B``) as given.  ``width=math.inf``: ``seeds`` replicates of the limit on
    ``particles`` particles, with the width-free (η̄_A, η̄_B) = (``eta_A``, ``eta_B``) and
    Z_A⁰ drawn from its law, or fixed to ``z_a0`` (r × inputs, e.g. a network's
    ``LoRARun.z_a0[k]``: the conditional limit).  The limit needs the μP readout;
    ``kernel``, the task's :func:`~.toy.input_kernel` if already computed, saves its
    quadrature (seconds for hundreds of inputs and a φ without closed form).
    """
    width = check_width(width)
    steps = check_int(steps, "steps")
    seeds = check_int(seeds, "seeds")
    eta_A = finite_non_negative(eta_A, "eta_A")
    eta_B = finite_non_negative(eta_B, "eta_B")
    if not isinstance(task, SineTask) or task.x.shape[1] != toy.d:
        raise SpecError(f"task must be a sine_task(d={toy.d}, ...) (the toy's input "
                        f"dimension), got {task!r:.80}")
    limit = width == math.inf
    if limit and toy.readout != "mup":
        raise SpecError(f"readout = {toy.readout!r}: the frozen readout n^(−½) amplifies a "
                        "Θ(1) feature update to n^(½), so the adapter's features vanish in "
                        "the stable limit (docs/theory.md §16.2); the limit is simulated for "
                        "readout = 'mup'")
    N = check_int(particles, "particles") if limit else width
    _require_memory(toy, N, len(task.y), "particles" if limit else "width")
    lr_A, lr_B = toy.rates(N, eta_A, eta_B) if limit else (eta_A, eta_B)
    chol = None
    if limit and z_a0 is None:
        chol = _chol(input_kernel(toy, task.x) if kernel is None
                     else np.asarray(kernel, float))
    elif limit:
        z_a0 = given_z_a0(toy, z_a0, len(task.y))
    runs = []
    with progress_bar(progress, seeds * steps,
                      f"LoRA {'limit' if limit else f'n = {width}'}") as tick:
        for s in range(seeds):
            try:
                rng = np.random.default_rng([seed, s, 0 if limit else width])
                h, omega, B, za0 = _draw(toy, task, N, rng, chol)
                if z_a0 is not None:
                    za0 = z_a0
                with np.errstate(over="ignore", invalid="ignore"):   # reported as divergence
                    tr, te, f, div, why = _one(toy, task, h, omega, B, za0, N, lr_A, lr_B,
                                               steps, tick)
            except KeyboardInterrupt:
                if not runs:
                    raise
                warnings.warn(f"interrupted: {len(runs)} of {seeds} seeds finished; the run "
                              "holds those (LoRARun.interrupted)", stacklevel=2)
                return LoRARun.stack(width, eta_A, eta_B, runs, interrupted=True)
            runs.append((tr, te, f, za0, div, why))
    return LoRARun.stack(width, eta_A, eta_B, runs)
