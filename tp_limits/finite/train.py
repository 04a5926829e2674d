"""``train_finite``: train the width-n network of an :class:`MLP` on a :class:`Routine`.

Per step t (docs/theory.md §0): forward pass on the batch with W_t, χ_t =
∇ℓ/B at f_t, backward pass with W_t, simultaneous update to W_{t+1}; the
evaluation inputs are evaluated with W_0 before the first step and with
W_{t+1} after each step.
"""
from __future__ import annotations

import time

import numpy as np

from .._version import __version__
from ..backend import get_backend
from ..errors import DivergenceError, MemoryBudgetError, SpecError
from ..losses import get_loss
from ..spec import MLP, Routine, check_compatible, check_int
from ..steps import StepLoop
from ..trajectory import Trajectory
from .network import FiniteNetwork
from .stats import StatsRecorder

RECORD_OPTIONS = ("stats", "spectral")


def _validate(net, routine, width, backprop, optimizer, record, on_divergence, dtype):
    if not isinstance(net, MLP):
        raise SpecError(f"net must be a tp.MLP, got {type(net).__name__}")
    if not isinstance(routine, Routine):
        raise SpecError(f"routine must be a tp.Routine, got {type(routine).__name__}")
    check_int(width, "width")
    if backprop not in ("exact", "decoupled"):
        raise SpecError(f"backprop = {backprop!r}; use 'exact' or 'decoupled'")
    if backprop == "decoupled" and net.L < 2:
        raise SpecError("backprop='decoupled' needs L >= 2 (it decouples hidden n x n matrices)")
    if optimizer not in ("sgd", "adam"):
        raise SpecError(f"optimizer = {optimizer!r}; use 'sgd' or 'adam'")
    unknown = set(record) - set(RECORD_OPTIONS)
    if unknown:
        raise SpecError(f"unknown record option(s) {sorted(unknown)}; choose from {RECORD_OPTIONS}")
    if on_divergence not in ("raise", "stop"):
        raise SpecError(f"on_divergence = {on_divergence!r}; use 'raise' or 'stop'")
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise SpecError(f"dtype = {dtype!r}; use numpy.float64 (default) or numpy.float32")
    return check_compatible(net, routine)


def train_finite(net: MLP, routine: Routine, width: int, seed: int = 0, backend: str = "numpy",
                 dtype=np.float64, backprop: str = "exact", optimizer: str | None = None,
                 record=RECORD_OPTIONS, on_divergence: str = "raise", progress: bool = False,
                 adam_betas=(0.9, 0.999), adam_eps: float = 1e-8) -> Trajectory:
    """Train ``net`` at width ``width`` on ``routine``; return its :class:`Trajectory`.

    Parameters
    ----------
    backend : 'numpy' or 'cupy' (CuPy imported only when asked for).
    backprop : 'exact', or 'decoupled' (TP4 §6; a negative control).
    optimizer : 'sgd' or 'adam'; defaults to ``net.param.optimizer``.
    record : subset of ('stats', 'spectral'): per-layer coordinate statistics
        on the evaluation inputs (finite/stats.py), and spectral-norm ratios
        (power iteration).  f_eval, f_train and loss are always recorded.
    on_divergence : 'raise' a DivergenceError naming step, layer and
        quantity, or 'stop' and return the partial trajectory with
        ``meta["diverged"]`` set.

    Ctrl-C stops cleanly: the steps completed so far are returned with
    ``meta["completed_steps"]`` and ``meta["interrupted"] = True``.
    """
    optimizer = optimizer or net.param.optimizer
    record = tuple(record)
    Y = _validate(net, routine, width, backprop, optimizer, record, on_divergence, dtype)
    b = get_backend(backend)
    keep_init = "stats" in record
    need = FiniteNetwork.bytes_needed(net, width, dtype, backprop, optimizer, keep_init)
    have = b.available_bytes()
    if need > 0.8 * have:
        raise MemoryBudgetError(
            f"width {width} needs about {need / 2**30:.2f} GiB for weights and copies but "
            f"{have / 2**30:.2f} GiB is available ({b.name}); lower the width, use "
            "dtype=numpy.float32, or drop 'stats' from record= (no W_0 copy)")

    started = time.perf_counter()
    loss_fn = get_loss(routine.loss)
    nw = FiniteNetwork(net, width, routine.lr, seed, b, dtype, backprop, optimizer,
                       keep_init, adam_betas, adam_eps)
    T, B, E = routine.steps, routine.batch_size, len(routine.eval_inputs)
    xp, tonp = b.xp, b.to_numpy
    Xe = b.asarray(routine.eval_inputs, dtype)
    f_eval = np.zeros((T + 1, E, net.d_out))
    f_train = np.zeros((T, B, net.d_out))
    losses = np.zeros(T)
    recorder = StatsRecorder(nw, T, E, spectral="spectral" in record) if keep_init else None

    def evaluate(t):
        hs, xs, f = nw.forward(Xe, step=t)
        f_eval[t] = tonp(f)
        if recorder is not None:
            recorder.record(t, hs, xs, f)

    loop = StepLoop(T, catch_divergence=on_divergence != "raise")
    with loop:
        evaluate(0)
        steps = loop
        if progress:
            from tqdm.auto import tqdm
            steps = tqdm(loop, desc=f"width {width}", unit="step")
        for t in steps:
            Xb = b.asarray(routine.X[routine.batch(t)], dtype)
            Yb = b.asarray(Y[routine.batch(t)], dtype)
            hs, xs, f = nw.forward(Xb, step=t)
            per_example = loss_fn.value(f, Yb, xp)
            losses[t] = float(xp.mean(per_example))
            if not np.isfinite(losses[t]):
                raise DivergenceError(t, None, "loss")
            f_train[t] = tonp(f)
            nw.step(hs, xs, loss_fn.grad(f, Yb, xp) / B)
            evaluate(t + 1)
    completed, interrupted, diverged = loop.completed, loop.interrupted, loop.diverged

    meta = {
        "engine": "finite", "width": int(width), "seed": int(seed), "backend": b.name,
        "dtype": np.dtype(dtype).name, "backprop": backprop, "optimizer": optimizer,
        "parametrization": repr(net.param), "phi": net.phi, "L": net.L,
        "d_in": net.d_in, "d_out": net.d_out, "sigma": list(net.sigma),
        "lr_mult": list(net.lr_mult), "readout_multiplier": net.readout_multiplier,
        "output_scale": net.output_scale, "lr": routine.lr, "loss": routine.loss,
        "batch_size": B, "steps": T, "completed_steps": completed, "interrupted": interrupted,
        "diverged": diverged, "wall_time_s": time.perf_counter() - started,
        "versions": {"tp_limits": __version__, "numpy": np.__version__},
    }
    return Trajectory(f_eval=f_eval[: completed + 1], f_train=f_train[:completed],
                      loss=losses[:completed],
                      stats=recorder.truncate(completed + 1) if recorder else {}, meta=meta)
