"""``simulate_limit``: the infinite-width limit of an MLP on a Routine.

Dispatch follows the exact classification (DESIGN §2):

* unstable  -> UnstableParametrizationError listing the violated conditions;
* trivial   -> f̊_t = f̊_0 (any L);
* kernel regime -> kernel gradient descent with the parametrization's kernel
  (any L; kernel_gd.py), f̊_0 from the NNGP, zero, or given;
* feature learning with L = 1 -> the particle system of docs/theory.md §2
  with the switches of §5.1 (exact closed form for φ = id);
* feature learning with L >= 2 -> the exact linear engine of §4.5 for φ = id,
  else the Monte Carlo engine of §4 with the Stein Ż estimator (deep_mc.py);
  true or decoupled backprop;
* Adam -> UnsupportedError, before any work starts.
"""
from __future__ import annotations

import functools
import time

import numpy as np

from .._version import __version__
from ..errors import (DivergenceError, SpecError, UnstableParametrizationError,
                      UnsupportedError)
from ..spec import MLP, Routine, check_compatible, check_int
from ..trajectory import Trajectory
from .deep_linear import deep_linear
from .deep_mc import deep_monte_carlo
from .deep_tangent import tangent_bytes_per_particle
from .kernel_gd import simulate_kernel
from .montecarlo import check_memory, run_replicates
from .one_hidden import simulate_one_hidden, stats_from

METHODS = ("exact", "monte_carlo", "quadrature")
SUPPORTED = ("supported now, for SGD: kernel-regime and trivial parametrizations at any "
             "depth; feature-learning parametrizations with one hidden layer (muP, MFP and "
             "their symmetry orbit, with zero or fixed readout); deep feature learning "
             "(Monte Carlo, exact for phi='id')")


def _check(net, routine, particles, replicates, method, eval_every, dtype, record, backprop):
    if not isinstance(net, MLP):
        raise SpecError(f"net must be a tp.MLP, got {type(net).__name__}")
    if not isinstance(routine, Routine):
        raise SpecError(f"routine must be a tp.Routine, got {type(routine).__name__}")
    check_compatible(net, routine)
    check_int(particles, "particles", 2)
    check_int(replicates, "replicates")
    check_int(eval_every, "eval_every")
    if method is not None and method not in METHODS:
        raise SpecError(f"method = {method!r}; choose one of {METHODS}")
    if method == "exact" and net.phi != "id":
        raise SpecError(f"method='exact' needs phi='id' (a closed form exists only for linear "
                        f"networks); got phi={net.phi!r}")
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise SpecError(f"dtype = {dtype!r}; use numpy.float64 (default) or numpy.float32")
    unknown = set(record) - {"stats"}
    if unknown:
        raise SpecError(f"unknown record option(s) {sorted(unknown)}; the limit records 'stats'")

    param = net.param
    k = param.classify()
    if k.regime == "unstable":
        raise UnstableParametrizationError(
            f"{param.label} is unstable, so it has no infinite-width limit: "
            + "; ".join(k.violations))
    if param.optimizer != "sgd":
        raise UnsupportedError(f"the limit of {param.optimizer} training is not implemented; "
                               + SUPPORTED)
    if backprop not in ("exact", "decoupled"):
        raise SpecError(f"backprop = {backprop!r}; use 'exact' or 'decoupled'")
    deep_fl = k.regime == "feature_learning" and param.L >= 2
    if backprop == "decoupled" and not deep_fl:
        raise SpecError("backprop='decoupled' applies to deep (L >= 2) feature-learning limits")
    if deep_fl and method == "quadrature":
        raise SpecError("method='quadrature' applies to one hidden layer only")
    return k


def _check_loss(res) -> None:
    """A loss that overflowed (f still finite but huge) is a divergence too."""
    bad = np.flatnonzero(~np.isfinite(res["loss"][: res["completed"]]))
    if len(bad) and (res["diverged"] is None or bad[0] < res["diverged"]["step"]):
        res["diverged"] = {"step": int(bad[0]), "layer": None, "quantity": "loss"}
        res["completed"] = int(bad[0])


def _deep_monte_carlo(net, routine, k, particles, seed, replicates, backprop, eval_every,
                      zdot, dtype, workers, on_step):
    N = particles + particles % 2
    T, B, E = routine.steps, routine.batch_size, len(routine.eval_inputs)
    hist = 4 * (net.L - 1) * B * T                                  # vec + hat, F and G
    # histories in the storage dtype; one pass's float64 particle arrays beside them
    per_particle = np.dtype(dtype).itemsize * hist + 8 * (
        net.d_in + net.d_out + 4 * net.L * max(B, E))
    zdot = "none (decoupled)" if backprop == "decoupled" else zdot
    if zdot == "tangent":
        per_particle += tangent_bytes_per_particle(net.L, net.d_in, net.d_out, B, T, E)
    procs = min(workers, replicates)          # replicates held in memory at once
    check_memory(N, per_particle * procs, "the deep engine's histories"
                 + (" and derivative arrays (zdot='tangent'; 'stein' needs far less)"
                    if zdot == "tangent" else "")
                 + (f" in {procs} worker processes" if procs > 1 else ""))
    eval_steps = set(range(0, T + 1, eval_every)) | {T}
    args = (net, routine, k.limit_switches, N, backprop == "decoupled", eval_steps, zdot, dtype)
    res, extra = run_replicates(
        lambda rng: deep_monte_carlo(*args[:4], rng, *args[4:6], on_step, *args[6:]),
        seed, replicates, "batch means over 32 particle groups (ignores error carried by chi "
                          "and the Ż coefficients; use replicates > 1)",
        task=functools.partial(_deep_replicate, *args), workers=workers,
        on_done=lambda: [on_step(t) for t in range(T)])
    extra.update({"engine": "limit/deep_monte_carlo", "particles": N, "zdot": zdot,
                  "workers": procs})
    return res, extra


def _deep_replicate(net, routine, switches, N, decoupled, eval_steps, zdot, dtype, seed_seq):
    """One deep Monte Carlo replicate in a worker process (no progress callback there)."""
    return deep_monte_carlo(net, routine, switches, N, np.random.default_rng(seed_seq),
                            decoupled, eval_steps, lambda t: None, zdot, dtype)


def _run_engine(net, routine, k, kernel_regime, method, particles, seed, replicates, backprop,
                eval_every, dtype, record, kernel, f0, samples, zdot, workers, on_step):
    """Run the engine the classification selects; returns (result dict, meta additions)."""
    if kernel_regime:
        return simulate_kernel(net, routine, k, f0, samples, seed, on_step)
    if net.L >= 2 and method == "exact":
        res = deep_linear(net, routine, k.limit_switches, backprop == "decoupled", on_step)
        return res, {"engine": "limit/deep_linear", "primitives": res["primitives"],
                     "se_method": "exact (linear combinations of Gaussian primitives)"}
    if net.L >= 2:
        return _deep_monte_carlo(net, routine, k, particles, seed, replicates, backprop,
                                 eval_every, zdot, dtype, workers, on_step)
    return simulate_one_hidden(net, routine, k.limit_switches, particles, seed, replicates,
                               method, eval_every, "stats" in record, kernel, dtype, on_step)


def _progress_callback(bar, particles):
    """Advance the bar one step; for Monte Carlo also show particle-steps per second."""
    if bar is None:
        return lambda t: None
    started = time.perf_counter()

    def on_step(t):
        bar.update(1)
        if particles:
            rate = particles * bar.n / max(time.perf_counter() - started, 1e-9)
            bar.set_postfix_str(f"{rate:.3g} particle-steps/s", refresh=False)
    return on_step


def simulate_limit(net: MLP, routine: Routine, particles: int = 100_000, seed: int = 0,
                   replicates: int = 1, method: str | None = None, eval_every: int = 1,
                   progress: bool = False, dtype=np.float64, record=("stats",),
                   kernel: str = "numba", f0="sample", samples: int = 64,
                   backprop: str = "exact", on_divergence: str = "raise",
                   zdot: str = "stein", workers: int = 1) -> Trajectory:
    """Simulate the infinite-width training dynamics; returns a :class:`Trajectory`.

    Parameters
    ----------
    particles : Monte Carlo particles per replicate (rounded up to an even
        count for antithetic pairs), or the node budget of ``quadrature``.
    replicates : independent Monte Carlo runs; their spread gives
        ``f_eval_se`` when > 1 (otherwise batch means over particle blocks).
    method : 'exact' (φ = id, the default for it), 'monte_carlo' (default
        otherwise) or 'quadrature' (d + d_out <= 3).
    eval_every : evaluate f̊ on the eval inputs every k-th step (and at T);
        rows in between are NaN and ``meta["eval_steps"]`` lists the others.
    record : ('stats',) to record per-layer statistics (keeps the initial
        particles), or () to save memory.
    kernel : 'numba' (the fused kernel) or 'numpy' (its plain twin).
    dtype : storage precision of the particles (one hidden layer) or of the
        hat histories (deep Monte Carlo): float64, or float32 to halve memory
        and memory traffic; expectations are accumulated in float64.
    backprop : 'exact', or 'decoupled' (deep limits: TP4 §6, a negative control).
    zdot : deep Monte Carlo only: the Ż estimator — 'stein' (regression on the
        sampled hats; time ∝ T², the default) or 'tangent' (forward-mode
        derivatives per particle; exact given the particles, time ∝ T³,
        memory ∝ T²).  ``meta["zdot"]`` records it.
    workers : deep Monte Carlo: run the replicates in this many processes
        (each with one BLAS and Numba thread; same seeds, same result as
        ``workers=1``).  Worth it when one run cannot keep every core busy.
    on_divergence : 'raise' a DivergenceError naming the step and quantity, or
        'stop' and return the steps before it with ``meta["diverged"]`` set.
    f0, samples : kernel and trivial regimes only: the initial function —
        'sample' (``samples`` NNGP draws when p = 1/2; mean ± standard error
        reported, draws in ``stats["f_eval_samples"]``), 'zero', or an array
        on ``kernel_points(routine)`` such as a finite network's own f_0
        (:func:`tp_limits.initial_outputs`).

    Ctrl-C returns the completed steps with ``meta["completed_steps"]``.
    """
    record = tuple(record)
    k = _check(net, routine, particles, replicates, method, eval_every, dtype, record, backprop)
    if on_divergence not in ("raise", "stop"):
        raise SpecError(f"on_divergence = {on_divergence!r}; use 'raise' or 'stop'")
    check_int(workers, "workers")
    if zdot not in ("stein", "tangent"):
        raise SpecError(f"zdot = {zdot!r}; use 'stein' or 'tangent'")
    check_int(samples, "samples")
    started = time.perf_counter()
    T = routine.steps
    kernel_regime = k.regime in ("kernel", "trivial")
    if kernel_regime:
        method = "kernel_gd"
    else:
        method = method or ("exact" if net.phi == "id" else "monte_carlo")
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=T * (replicates if method == "monte_carlo" else 1),
                   desc=f"limit ({method})", unit="step")
    on_step = _progress_callback(bar, particles + particles % 2 if method == "monte_carlo"
                                 else None)
    try:
        # overflow is detected and reported as a DivergenceError below, not warned about
        with np.errstate(over="ignore", invalid="ignore"):
            res, extra = _run_engine(net, routine, k, kernel_regime, method, particles, seed,
                                     replicates, backprop, eval_every, dtype, record, kernel,
                                     f0, samples, zdot, workers, on_step)
    finally:
        if bar is not None:
            bar.close()
    _check_loss(res)
    if res["diverged"] and on_divergence == "raise":
        d = res["diverged"]
        raise DivergenceError(d["step"], d["layer"], d["quantity"], "in the limit engine")
    done = res["completed"]
    every = 1 if kernel_regime else eval_every
    eval_steps = sorted(s for s in set(range(0, T + 1, every)) | {T} if s <= done)
    meta = {
        "engine": "limit/one_hidden", "method": method,
        "kernel": kernel if method in ("monte_carlo", "quadrature") else None,
        "seed": int(seed), "replicates": int(replicates), "dtype": np.dtype(dtype).name,
        "parametrization": repr(net.param), "phi": net.phi, "L": net.L, "d_in": net.d_in,
        "d_out": net.d_out, "sigma": list(net.sigma), "lr_mult": list(net.lr_mult),
        "readout_multiplier": net.readout_multiplier, "output_scale": net.output_scale,
        "lr": routine.lr, "loss": routine.loss, "batch_size": routine.batch_size,
        "regime": k.regime, "backprop": backprop,
        "switches": None if k.limit_switches is None else {
            "train_layers": list(k.limit_switches.train_layers),
            "readout_init": k.limit_switches.readout_init,
            "readout_update": k.limit_switches.readout_update},
        "steps": T, "completed_steps": done, "eval_steps": eval_steps,
        "interrupted": bool(res["interrupted"]), "diverged": res["diverged"],
        "wall_time_s": time.perf_counter() - started,
        "versions": {"tp_limits": __version__, "numpy": np.__version__},
    }
    meta.update(extra)
    stats = stats_from(res, done + 1) if ("stats" in record and not kernel_regime) else {}
    if res.get("samples") is not None:
        stats["f_eval_samples"] = res["samples"][:, : done + 1]
    return Trajectory(f_eval=res["f_eval"][: done + 1], f_train=res["f_train"][:done],
                      loss=res["loss"][:done], stats=stats, meta=meta,
                      f_eval_se=res["se"][: done + 1])
