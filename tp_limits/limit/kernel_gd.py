"""Kernel-regime and trivial limits: kernel gradient descent (docs/theory.md §5.2).

On the distinct inputs Z (training inputs first, then evaluation inputs),

    f̊_{t+1}(Z) = f̊_t(Z) - η K(Z, ξ_{t,·}) χ_t,    χ_{t,i} = ∇ℓ(f̊_t(ξ_{t,i}), y_{t,i}) / B,

with K the parametrization's limiting kernel (kernels.ntk); K = 0 in the
trivial regime (f̊_t = f̊_0).  The initial function f̊_0 is

* ``"sample"``: when p = 1/2, ``samples`` independent draws from the NNGP
  N(0, α² σ_{L+1}² V^L ⊗ I) on Z (the limit is then random; the trajectory
  reports the mean over samples ± its standard error, and keeps the draws in
  ``stats["f_eval_samples"]``); when p > 1/2, f̊_0 = 0 and one path suffices;
* ``"zero"``: f̊_0 = 0 (for MSE, the mean path);
* an array (|Z|, d_out): a given f_0 — typically a finite network's own,
  from :func:`tp_limits.finite.initial_outputs`, to compare that network with
  kernel gradient descent started where it starts.
"""
from __future__ import annotations

import numpy as np

from ..errors import DivergenceError, SpecError
from ..losses import get_loss
from ..spec import distinct_rows
from ..steps import StepLoop
from .kernels import nngp, ntk


def kernel_points(routine) -> np.ndarray:
    """Distinct training inputs (first-seen order), then distinct new eval inputs."""
    X = routine.X[: routine.steps * routine.batch_size]
    return distinct_rows(np.vstack([X, routine.eval_inputs]))


def _index(Z, A) -> np.ndarray:
    """Row positions in Z of the rows of A (the bitwise match distinct_rows uses)."""
    lookup = {z.tobytes(): i for i, z in enumerate(Z)}
    return np.array([lookup[a.tobytes()] for a in A], dtype=int)


def _initial(net, Z, f0, samples, rng, law):
    d_out = net.d_out
    if isinstance(f0, str):
        if f0 not in ("sample", "zero"):
            raise SpecError(f"f0 = {f0!r}; use 'sample', 'zero' or an array (|Z|, d_out)")
        if f0 == "zero" or law != "gp":
            return np.zeros((1, len(Z), d_out)), "zero" if f0 == "zero" else "zero (p > 1/2)"
        C = nngp(net, Z)
        w, Q = np.linalg.eigh((C + C.T) / 2)
        root = Q * np.sqrt(np.clip(w, 0.0, None))            # C = root rootᵀ, PSD-safe
        draws = root @ rng.standard_normal((samples, len(Z), d_out))
        return draws, f"NNGP samples ({samples})"
    arr = np.asarray(f0, dtype=float)
    if arr.ndim == 1 and d_out == 1:
        arr = arr[:, None]
    if arr.shape != (len(Z), d_out):
        raise SpecError(f"f0 array has shape {arr.shape}; expected ({len(Z)}, {d_out}) on "
                        "tp_limits.limit.kernel_gd.kernel_points(routine)")
    if not np.all(np.isfinite(arr)):
        raise SpecError("f0 contains NaN or inf")
    return arr[None], "given"


def simulate_kernel(net, routine, classification, f0, samples, seed, on_step):
    """Run kernel GD (or the constant trivial limit); returns (result dict, meta additions)."""
    Z = kernel_points(routine)
    T, B = routine.steps, routine.batch_size
    train_idx = _index(Z, routine.X[: T * B])
    eval_idx = _index(Z, routine.eval_inputs)
    Y = routine.targets(net.d_out)
    loss = get_loss(routine.loss)
    trivial = classification.regime == "trivial"
    K = np.zeros((len(Z), len(Z))) if trivial else ntk(net, Z)
    F, f0_desc = _initial(net, Z, f0, samples, np.random.default_rng(seed), classification.f0_law)
    S, E = len(F), len(eval_idx)
    f_eval = np.zeros((S, T + 1, E, net.d_out))
    f_train = np.zeros((S, T, B, net.d_out))
    losses = np.zeros((S, T))
    f_eval[:, 0] = F[:, eval_idx]
    loop = StepLoop(T, on_step)
    with loop:
        for t in loop:
            idx = train_idx[t * B:(t + 1) * B]
            fb = F[:, idx]
            Yb = Y[t * B:(t + 1) * B]
            f_train[:, t] = fb
            losses[:, t] = [np.mean(loss.value(fb[s], Yb, np)) for s in range(S)]
            chi = np.stack([loss.grad(fb[s], Yb, np) for s in range(S)]) / B
            F = F - routine.lr * np.einsum("zi,sio->szo", K[:, idx], chi)
            if not np.all(np.isfinite(F)):
                raise DivergenceError(t + 1, None, "output f")
            f_eval[:, t + 1] = F[:, eval_idx]
    completed, interrupted, diverged = loop.completed, loop.interrupted, loop.diverged
    se = (f_eval.std(axis=0, ddof=1) / np.sqrt(S) if S > 1 else np.zeros_like(f_eval[0]))
    res = {"f_eval": f_eval.mean(axis=0), "se": se, "f_train": f_train.mean(axis=0),
           "loss": losses.mean(axis=0), "completed": completed, "interrupted": interrupted,
           "diverged": diverged, "samples": f_eval if S > 1 else None}
    meta = {"engine": "limit/trivial" if trivial else "limit/kernel", "method": "kernel_gd",
            "f0": f0_desc, "kernel_components": list(classification.kernel_components),
            "se_method": (f"standard error over {S} NNGP samples of f_0" if S > 1 else
                          "exact (deterministic given f_0)")}
    return res, meta
