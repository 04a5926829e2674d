"""Kernel-regime and trivial limits: kernel gradient descent (docs/theory.md §5.2).

On the kernel points Z of the routine (distinct training inputs first, then
the distinct new evaluation inputs),

    f̊_{t+1}(Z) = f̊_t(Z) - η K(Z, ξ_{t,·}) χ_t,    χ_{t,i} = ∇ℓ(f̊_t(ξ_{t,i}), y_{t,i}) / B,

with K the parametrization's limiting kernel (kernels.ntk); K = 0 in the
trivial regime (f̊_t = f̊_0).  The kernel is frozen, so f̊ is linear in the
weights' change and moves by the optimizer's own rule for one coordinate, with the
increment η K(Z, ξ_{t,·}) χ_t in place of its gradient step: under momentum μ,

    ΔF_t = μ ΔF_{t−1} + η K(Z, ξ_{t,·}) χ_t,     f̊_{t+1}(Z) = f̊_t(Z) − ΔF_t

(docs/theory.md §10.4; optimizers that are not linear in the gradients, and
weight decay, are refused when the engine is selected).  The initial function f̊_0 is

* ``"sample"``: when p = 1/2, ``samples`` independent draws from the NNGP
  N(0, α² σ_{L+1}² V^L ⊗ I) on Z (the limit is then random; the trajectory
  reports the mean over samples ± its standard error, and keeps the draws in
  ``stats["f_eval_samples"]``); when p > 1/2, f̊_0 = 0 and one path suffices;
* ``"zero"``: f̊_0 = 0 (for MSE, the mean path);
* an array (|Z|, d_out): a given f_0 — typically a finite network's own,
  from :func:`tp_limits.initial_outputs`, to compare that network with
  kernel gradient descent started where it starts.
"""
from __future__ import annotations

import numpy as np

from ...engine.memory import require_memory
from ...engine.steps import StepLoop, check_size
from ...errors import SpecError
from ..base import Engine
from ..result import LimitResult
from .kernels import biases_moving_with, nngp, ntk


def _index(Z, A) -> np.ndarray:
    """Row positions in Z of the rows of A (the bitwise match distinct_rows uses)."""
    lookup = {z.tobytes(): i for i, z in enumerate(Z)}
    return np.array([lookup[a.tobytes()] for a in A], dtype=int)


def _given_f0(f0, Z, d_out) -> np.ndarray:
    """A user's f_0 on the kernel points, checked: shape (|Z|, d_out), finite."""
    try:
        arr = np.asarray(f0, dtype=float)
    except (TypeError, ValueError):
        raise SpecError(f"f0 = {f0!r}; use 'sample', 'zero' or an array (|Z|, d_out)") from None
    if arr.ndim == 1 and d_out == 1:
        arr = arr[:, None]
    if arr.shape != (len(Z), d_out):
        raise SpecError(f"f0 array has shape {arr.shape}; expected ({len(Z)}, {d_out}) on "
                        "tp.kernel_points(routine)")
    if not np.all(np.isfinite(arr)):
        raise SpecError("f0 contains NaN or inf")
    return arr


def _phase_groups(components: dict, problem) -> list:
    """[(K, counts)]: the kernel components (ntk's, keyed by the parameters' keys) summed
    over the parameters that train at the same steps, with their update counts.  Without phases it
    is one group, the whole kernel.  The rule moves f by each group's kernel with the
    group's own state: without decay it is linear and independent of f, so the groups'
    steps add, as each layer's own optimizer step adds in the network (docs/theory.md
    §10.10)."""
    names = {p.key: p.name for p in problem.program.parameters}
    groups = {}
    for key, K in components.items():
        counts = problem.clocks.counts[names[key]]
        entry = groups.setdefault(counts.tobytes(), [0.0, counts])
        entry[0] = entry[0] + K
    return [tuple(v) for v in groups.values()]


class KernelEngine(Engine):
    """Kernel gradient descent (kernel regime) or the constant limit (trivial regime)."""

    method = "kernel_gd"

    def __init__(self, problem, classification, options):
        super().__init__(problem, classification, options)
        self.k = classification
        self.trivial = classification.regime == "trivial"
        self.name = "limit/trivial" if self.trivial else "limit/kernel"
        self.Z = problem.routine.kernel_points()
        self.f0 = (options.f0 if isinstance(options.f0, str)
                   else _given_f0(options.f0, self.Z, problem.net.d_out))
        self.info = {"kernel_components": list(classification.kernel_components)}
        P, L = len(self.Z), problem.net.L
        # the layer kernels V, V̇, Π, K (4L + 1 matrices) and the pair-moment temporaries
        require_memory(8.0 * (4 * L + 4) * P * P
                       + 8.0 * 2 * options.samples * (problem.T + 1) * P * problem.net.d_out,
                       f"the kernels of {P:,} distinct inputs ((4L + 4) · {P:,}² floats)",
                       advice="fewer distinct training and evaluation inputs")

    def _initial(self, rng):
        """(S, |Z|, d_out) initial functions and a description of where they come from."""
        net, Z, f0 = self.problem.net, self.Z, self.f0
        if not isinstance(f0, str):
            return f0[None], "given"
        if f0 == "zero" or self.k.f0_law != "gp":
            return np.zeros((1, len(Z), net.d_out)), "zero" if f0 == "zero" else "zero (p > 1/2)"
        C = nngp(net, Z)
        w, Q = np.linalg.eigh((C + C.T) / 2)
        root = Q * np.sqrt(np.clip(w, 0.0, None))            # C = root rootᵀ, PSD-safe
        S = self.options.samples
        draws = root @ rng.standard_normal((S, len(Z), net.d_out))
        return draws, f"NNGP samples ({S})"

    def run(self, on_step) -> LimitResult:
        p, Z = self.problem, self.Z
        T, B, do = p.T, p.B, p.net.d_out
        eval_steps = self.options.eval_steps(T)
        train_idx = _index(Z, p.routine.training_inputs)
        eval_idx = _index(Z, p.eval_inputs)
        # trivial: of the parameters only the width-free ones move, a readout bias (§13)
        moving = None if not self.trivial else biases_moving_with(p.net, ())
        groups = (_phase_groups(ntk(p.net, Z, components=True, layers=moving), p)
                  if moving is None or moving else [])
        F, f0_desc = self._initial(np.random.default_rng(self.options.seed))
        S, E = len(F), len(eval_idx)
        f_eval = np.full((S, T + 1, E, do), np.nan)
        f_train = np.zeros((S, T, B, do))
        losses = np.zeros((S, T))
        f_eval[:, 0] = F[:, eval_idx]
        opt = p.optimizer
        states = [opt.rule.zeros(F) for _ in groups]
        loop = StepLoop(T, on_step)
        with loop:
            for t in loop:
                idx = train_idx[p.routine.rows(t)]
                fb = F[:, idx]
                Yb = p.batch(t)[1]
                f_train[:, t] = fb
                losses[:, t] = [np.mean(p.loss.value(fb[s], Yb, np)) for s in range(S)]
                chi = np.stack([p.loss.grad(fb[s], Yb, np) for s in range(S)]) / B
                for g, (K, counts) in enumerate(groups):
                    if counts[t]:            # the group's layers train at this step
                        scale, h = opt.coordinate(p.routine.lr, 1.0, 0.0, int(counts[t]),
                                                  p.rate(t))
                        F, states[g] = opt.rule.apply(
                            F, scale * np.einsum("zi,sio->szo", K[:, idx], chi), states[g], h)
                check_size(F, t + 1, None, "output f", self.options.divergence_bound)
                if t + 1 in eval_steps:
                    f_eval[:, t + 1] = F[:, eval_idx]
        se = (f_eval.std(axis=0, ddof=1) / np.sqrt(S) if S > 1
              else np.where(np.isnan(f_eval[0]), np.nan, 0.0))
        res = LimitResult(f_eval=f_eval.mean(axis=0), f_eval_se=se,
                          f_train=f_train.mean(axis=0), loss=losses.mean(axis=0),
                          f_eval_samples=f_eval if S > 1 else None,
                          se_method=(f"standard error over {S} NNGP samples of f_0" if S > 1
                                     else "exact (deterministic given f_0)"),
                          se_dof=S - 1 if S > 1 else None,
                          info={**self.info, "f0": f0_desc})
        return res.finish(loop)
