"""The finite engine's time estimate: a measured cost model (docs/performance.md, "Time
estimates").

A width-n run of T steps costs, in units whose prices ``COST`` were fitted to measured
runs on the two-core machine of docs/performance.md (benchmarks/bench_cost_model.py
--finite --fit):

* dense = (L − 1) n² (3 B T + E T_e): each hidden n × n layer's products — the batch's
  forward and backward pass, the rank-B update, and the evaluation inputs' forward pass
  at the T_e evaluated steps (T_e = T + 1 unless ``eval_every`` thins them);
* vec = (L + 1) n (B T + E T_e): each layer's entrywise work (φ, φ', the thin input and
  readout layers, the optimizer's state);
* call = T (L + 1): each layer's library calls and bookkeeping, whatever n;
* state = T (L − 1) n² S: an entrywise optimizer's S state arrays per hidden matrix
  (momentum: 1, Adam: 2), each read and written every step;
* stats = T_e (L − 1) n² (E + 2): ``record`` 'stats' — each hidden layer's ΔW x on the
  evaluation inputs and ‖ΔW‖_F, at each evaluated step;
* spectral = T_e (L − 1) n²: ``record`` 'spectral' — the warm-started power sweeps for
  ‖ΔW‖_*, which stop once the estimate settles; under a matrix-sign update (Muon) ΔW's
  singular values are nearly equal, the sweeps run to their cap, and the units count as
  spectral_flat instead;
* lowrank = (L − 1) n² Σ_t k_t and small = (L − 1) Σ_t (n k_t² + s k_t³): a pair-matrix
  optimizer's (Muon's) update Pᵀ K Q through a k_t × k_t core with s Newton–Schulz steps,
  k_t = min(B (t + 1), k_max) history rows at step t (docs/theory.md §11.3).  This is the
  term that makes finite Muon's cost grow with the history;
* a dense transform (SpectralUpdate over Adam, docs/theory.md §11.7): Adam's two moments
  in ``state``, and T (L − 1) n³ priced apart (``SVD_PRICE`` per n³ for a thin SVD,
  ``NS_STEP_PRICE`` per n³ and Newton–Schulz step), measured at n = 1024 on the
  two-core machine with one core busy, not fitted with the rest.

The estimate is a floor for a loaded machine and a ceiling for a GPU; it is what
``time_budget`` compares against, before any work.
"""
from __future__ import annotations

import numpy as np

#: seconds per unit of each term of :func:`cost_units`, fitted by
#: benchmarks/bench_cost_model.py --finite --fit (float64 weights)
COST = (2.6e-10, 1.68e-8, 1.72e-4, 6.08e-9, 6.4e-10, 2.85e-8, 1.29e-7, 3.82e-10, 1.28e-9)
NAMES = ("dense", "vec", "call", "state", "stats", "spectral", "spectral_flat", "lowrank",
         "small")
#: seconds per n³ of a dense transform of an n × n direction: a thin SVD, and one
#: Newton–Schulz step (three n × n products)
SVD_PRICE, NS_STEP_PRICE = 9.5e-10, 1.3e-10


def cost_units(problem, width: int, record=(), evals: int | None = None) -> tuple:
    """The terms of a finite run's cost, in the order of ``NAMES`` (see the module
    docstring); ``evals`` the evaluated steps T_e (default T + 1: every step)."""
    net, T, B, E = problem.net, problem.T, problem.B, problem.E
    Te = T + 1 if evals is None else evals
    L, n = net.L, float(width)
    hidden = L - 1
    dense = hidden * n * n * (3 * B * T + E * Te)
    vec = (L + 1) * n * (B * T + E * Te)
    call = T * (L + 1)
    opt = problem.optimizer
    state = T * hidden * n * n * len(opt.rule.slots) if opt.coordinatewise else 0.0
    if opt.dense_transform:
        state = T * hidden * n * n * 2                    # Adam's moments of the direction
    stats = Te * hidden * n * n * (E + 2) if "stats" in record else 0.0
    sweeps = Te * hidden * n * n if "spectral" in record else 0.0
    spectral, spectral_flat = (0.0, sweeps) if opt.pair_matrix else (sweeps, 0.0)
    lowrank = small = 0.0
    if opt.pair_matrix and hidden:
        k = np.minimum(B * np.arange(1, T + 1, dtype=float), opt.finite_state_rows(B, T))
        steps = getattr(opt, "ns_steps", None) or 10      # the exact polar: an eigensolve
        lowrank = hidden * n * n * float(k.sum())
        small = hidden * float(np.sum(n * k * k + steps * k ** 3))
    return dense, vec, call, state, stats, spectral, spectral_flat, lowrank, small


def time_estimate(problem, width: int, record=(), evals: int | None = None) -> float:
    """Seconds the finite run should take on the two-core machine: the terms of
    :func:`cost_units` times their fitted prices (float64 prices: a float32 run costs
    less)."""
    return float(np.dot(cost_units(problem, width, record, evals), COST)) + \
        dense_transform_seconds(problem, width)


def dense_transform_seconds(problem, width: int) -> float:
    """T (L − 1) n³ times the price of the optimizer's dense transform (0 without one)."""
    opt = problem.optimizer
    if not opt.dense_transform:
        return 0.0
    steps = getattr(opt.spectral, "ns_steps", None)
    price = NS_STEP_PRICE * steps if steps else SVD_PRICE
    return problem.T * (problem.net.L - 1) * float(width) ** 3 * price
