"""The time estimates of the deep Monte Carlo engine and of finite networks against
measured wall times, and the fit of their constants (limit/montecarlo/engine.py and
finite/cost.py, ``COST``; docs/performance.md, "Time estimates").

    python benchmarks/bench_cost_model.py [--finite | --one-hidden] [--fit] [--quick]

``--finite`` measures ``train_finite`` (finite/cost.py's terms: dense, vec, call, state,
stats, spectral, spectral_flat, lowrank, small), ``--one-hidden`` the one-hidden-layer
limit's host kernel (limit/fused/cost.py: mac, phi, pass, state, stats, call), instead of
the deep limit.

Each configuration runs once, in this process, after a warm-up run of its kind (the
compiles are not part of a run's cost).  The estimate is the engine's own
(``prepare_limit(...).engine.info["time_estimate_s"]``).  With ``--fit`` the constants of
the cost model are refitted to the measured walls by non-negative least squares on the
relative error (each row divided by its wall) and printed in the form ``COST`` takes:

    wall ≈ rounds × (c_hist U_hist + c_step U_step + c_call U_call + c_pair U_pair
                     + c_core U_core)

with U_hist = N (L − 1) B (B + E) T² / 2 (the passes over the stored histories),
U_step = N T (L + 1)(B + E) (each step's forward and backward pass over the particles),
U_call = T (L + 1) (the per-layer, per-step library calls and bookkeeping),
U_pair = M N T (L + 1) / 2¹⁴ (Adam's M partners, per particle) and
U_core = (L − 1) B³ T⁴ / 4 (Muon's k × k cores, k = B t at step t).
"""
import argparse
import time

import numpy as np

import tp_limits as tp
from tp_limits.finite import cost as finite_cost
from tp_limits.limit.fused import cost as one_hidden_cost
from tp_limits.finite.train import prepare_finite
from tp_limits.limit.montecarlo.engine import cost_units
from tp_limits.limit.simulate import prepare_limit

#: (label, optimizer, L, residual, N, T, B, E)
RUNS = [
    ("SGD", "sgd", 2, False, 2 ** 14, 15, 1, 2),
    ("SGD", "sgd", 2, False, 2 ** 14, 60, 1, 2),
    ("SGD", "sgd", 2, False, 2 ** 14, 240, 1, 2),
    ("SGD", "sgd", 3, False, 2 ** 14, 120, 2, 4),
    ("SGD", "sgd", 5, False, 2 ** 13, 60, 1, 2),
    ("SGD", "sgd", 2, False, 2 ** 16, 60, 4, 4),
    ("SGD", "sgd", 2, False, 2 ** 14, 600, 1, 2),
    ("Adam", "adam", 2, False, 2 ** 14, 15, 1, 2),
    ("Adam", "adam", 2, False, 2 ** 14, 60, 1, 2),
    ("Adam", "adam", 3, False, 2 ** 13, 100, 2, 2),
    ("Muon", "muon", 2, False, 2 ** 14, 15, 1, 2),
    ("Muon", "muon", 2, False, 2 ** 14, 60, 1, 2),
    ("Muon", "muon", 3, False, 2 ** 13, 150, 2, 2),
    ("residual K=8", "sgd", 9, True, 2 ** 13, 15, 1, 2),
    ("residual K=32", "sgd", 33, True, 2 ** 12, 15, 1, 2),
    ("residual K=200", "sgd", 201, True, 2 ** 10, 8, 1, 2),
]
QUICK = {0, 1, 4, 7, 10, 13}

#: finite networks: (label, optimizer, L, n, T, B, E, record)
FINITE_RUNS = [
    ("SGD", "sgd", 2, 256, 50, 4, 8, ()),
    ("SGD", "sgd", 2, 1024, 50, 4, 8, ()),
    ("SGD", "sgd", 3, 2048, 30, 4, 8, ()),
    ("SGD", "sgd", 2, 4096, 20, 4, 8, ()),
    ("SGD", "sgd", 1, 16384, 200, 4, 8, ()),
    ("SGD", "sgd", 1, 1024, 400, 4, 8, ()),
    ("SGD", "sgd", 5, 512, 100, 1, 2, ()),
    ("SGD stats", "sgd", 2, 1024, 30, 4, 8, ("stats",)),
    ("SGD stats+spectral", "sgd", 2, 1024, 30, 4, 8, ("stats", "spectral")),
    ("SGD stats+spectral", "sgd", 3, 2048, 15, 4, 8, ("stats", "spectral")),
    ("Adam", "adam", 2, 1024, 50, 4, 8, ()),
    ("Adam", "adam", 3, 2048, 20, 4, 8, ()),
    ("SGD momentum", "momentum", 2, 2048, 30, 4, 8, ()),
    ("Muon", "muon", 2, 1024, 30, 4, 8, ()),
    ("Muon", "muon", 2, 2048, 40, 4, 8, ()),
    ("Muon", "muon", 3, 512, 100, 2, 4, ()),
    ("Muon", "muon", 2, 4096, 20, 4, 8, ()),
    ("Muon stats+spectral", "muon", 2, 1024, 30, 4, 8, ("stats", "spectral")),
    ("Muon stats+spectral", "muon", 2, 2048, 15, 4, 8, ("stats", "spectral")),
]
FINITE_QUICK = {0, 3, 4, 8, 11, 13, 14}


def problem(opt, L, residual, T, B, E):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((T * B, 2)) / np.sqrt(2)
    Y = np.tanh(X[:, :1] - X[:, 1:])
    optimizer = {"sgd": tp.SGD(), "adam": tp.Adam(), "muon": tp.Muon()}[opt]
    lr = {"sgd": 0.1, "adam": 0.01, "muon": 0.05}[opt]
    r = tp.Routine(X, Y, lr=lr, batch_size=B, optimizer=optimizer,
                   eval_inputs=rng.standard_normal((E, 2)) / np.sqrt(2))
    res = tp.Residual.depth_mup(opt) if residual else None
    return tp.MLP(tp.mup(L, optimizer=opt), 2, 1, phi="tanh", residual=res), r


#: the one-hidden-layer limit (the 'numba' kernel): (label, optimizer, φ, N, T, B, E, d, stats)
ONE_HIDDEN_RUNS = [
    ("SGD", "sgd", "tanh", 2 ** 14, 200, 4, 8, 4, False),
    ("SGD", "sgd", "tanh", 2 ** 17, 200, 4, 8, 4, False),
    ("SGD", "sgd", "tanh", 2 ** 17, 2000, 4, 8, 4, False),
    ("SGD", "sgd", "tanh", 2 ** 16, 100, 16, 32, 16, False),
    ("SGD", "sgd", "tanh", 2 ** 16, 100, 1, 2, 64, False),
    ("SGD", "sgd", "tanh", 2 ** 12, 2000, 1, 2, 2, False),
    ("SGD", "sgd", "tanh", 2 ** 18, 50, 8, 16, 8, False),
    ("SGD relu", "sgd", "relu", 2 ** 17, 200, 4, 8, 4, False),
    ("SGD stats", "sgd", "tanh", 2 ** 16, 200, 4, 8, 4, True),
    ("momentum", "momentum", "tanh", 2 ** 16, 200, 4, 8, 16, False),
    ("Adam", "adam", "tanh", 2 ** 16, 200, 4, 8, 4, False),
    ("Adam", "adam", "tanh", 2 ** 17, 100, 8, 8, 16, False),
]
ONE_HIDDEN_QUICK = {0, 2, 4, 10}


def one_hidden_problem(opt, phi, T, B, E, d):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((T * B, d)) / np.sqrt(d)
    Y = np.tanh(X[:, :2])
    optimizer = {"sgd": tp.SGD(), "momentum": tp.SGD(momentum=0.9), "adam": tp.Adam()}[opt]
    lr = {"sgd": 0.5, "momentum": 0.1, "adam": 0.01}[opt]
    r = tp.Routine(X, Y, lr=lr, batch_size=B, optimizer=optimizer,
                   eval_inputs=rng.standard_normal((E, d)) / np.sqrt(d))
    rule = "sgd" if opt == "momentum" else opt
    return tp.MLP(tp.mup(1, optimizer=rule), d, 2, phi=phi), r


def measure_one_hidden(run):
    label, opt, phi, N, T, B, E, d, stats = run
    net, r = one_hidden_problem(opt, phi, T, B, E, d)
    kw = dict(particles=N, replicates=1, record=("stats",) if stats else (), time_budget=None,
              workers=1)
    small_net, small_r = one_hidden_problem(opt, phi, 3, B, E, d)
    tp.simulate_limit(small_net, small_r, **{**kw, "particles": 1024})          # warm-up
    plan = prepare_limit(net, r, **kw)
    t0 = time.perf_counter()
    tp.simulate_limit(net, r, **kw)
    wall = time.perf_counter() - t0
    units = one_hidden_cost.cost_units(plan.problem, plan.engine.particles, stats)
    return plan.engine.info["time_estimate_s"], wall, units


def finite_problem(opt, L, T, B, E, d=8):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((T * B, d)) / np.sqrt(d)
    Y = np.tanh(X[:, :2])
    optimizer = {"sgd": tp.SGD(), "momentum": tp.SGD(momentum=0.9), "adam": tp.Adam(),
                 "muon": tp.Muon()}[opt]
    lr = {"sgd": 0.1, "momentum": 0.1, "adam": 0.01, "muon": 0.05}[opt]
    r = tp.Routine(X, Y, lr=lr, batch_size=B, optimizer=optimizer,
                   eval_inputs=rng.standard_normal((E, d)) / np.sqrt(d))
    rule = "sgd" if opt == "momentum" else opt
    return tp.MLP(tp.mup(L, optimizer=rule), d, 2, phi="tanh"), r


def measure_finite(run):
    label, opt, L, n, T, B, E, record = run
    net, r = finite_problem(opt, L, T, B, E)
    small_net, small_r = finite_problem(opt, L, 2, B, E)
    tp.train_finite(small_net, small_r, 64, record=record)                   # warm-up
    plan = prepare_finite(net, r, n, record=record, time_budget=None)
    t0 = time.perf_counter()
    tp.train_finite(net, r, n, record=record, time_budget=None)
    wall = time.perf_counter() - t0
    units = finite_cost.cost_units(plan.problem, n, record)
    return finite_cost.time_estimate(plan.problem, n, record), wall, units


def measure(run, replicates=1):
    label, opt, L, residual, N, T, B, E = run
    net, r = problem(opt, L, residual, T, B, E)
    kw = dict(particles=N, replicates=replicates, record=(), time_budget=None,
              sampler="antithetic", workers=1)
    small_net, small_r = problem(opt, L, residual, 3, B, E)
    tp.simulate_limit(small_net, small_r, **{**kw, "particles": 256})      # warm-up
    plan = prepare_limit(net, r, **kw)
    t0 = time.perf_counter()
    tp.simulate_limit(net, r, **kw)
    wall = time.perf_counter() - t0
    spec = plan.engine.spec
    units = cost_units(plan.problem, spec.N, spec.partners * (2 if spec.debias else 1))
    return plan.engine.info["time_estimate_s"], wall, units


#: each mode: its runs, the quick subset, how one is measured, the table's size columns
#: and how a run fills them, and the names of its cost terms
MODES = {
    "deep": (RUNS, QUICK, measure, "L | N | T | B | E",
             lambda r: f"{r[2]} | {r[4]:,} | {r[5]} | {r[6]} | {r[7]}",
             ("hist", "step", "call", "pair", "core")),
    "finite": (FINITE_RUNS, FINITE_QUICK, measure_finite, "L | n | T | B | E",
               lambda r: f"{r[2]} | {r[3]:,} | {r[4]} | {r[5]} | {r[6]}", finite_cost.NAMES),
    "one_hidden": (ONE_HIDDEN_RUNS, ONE_HIDDEN_QUICK, measure_one_hidden, "N | T | B | E | d",
                   lambda r: f"{r[3]:,} | {r[4]} | {r[5]} | {r[6]} | {r[7]}",
                   one_hidden_cost.NAMES),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a few of the runs")
    ap.add_argument("--finite", action="store_true", help="finite networks (train_finite)")
    ap.add_argument("--one-hidden", action="store_true",
                    help="the one-hidden-layer limit's host kernel")
    args = ap.parse_args()
    mode = "finite" if args.finite else "one_hidden" if args.one_hidden else "deep"
    runs, quick, measure_one, columns, cells, names = MODES[mode]
    print(f"| job | {columns} | estimate (s) | wall (s) | wall / estimate |\n"
          "|---|---|---|---|---|---|---|---|---|", flush=True)
    rows, walls = [], []
    for i, run in enumerate(runs):
        if args.quick and i not in quick:
            continue
        est, wall, units = measure_one(run)
        print(f"| {run[0]} | {cells(run)} | {est:.2f} | {wall:.2f} | {wall / est:.2f} |",
              flush=True)
        rows.append(units)
        walls.append(wall)
    if args.fit:
        fit(rows, walls, names)


def fit(rows, walls, names):
    """Non-negative least squares on the relative error: each row divided by its wall."""
    from scipy.optimize import nnls
    A = np.array(rows) / np.array(walls)[:, None]
    scale = np.abs(A).max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(A / scale, np.ones(len(walls)))
    coef = coef / scale
    print("fitted: " + ", ".join(f"{n}={c:.3g}" for n, c in zip(names, coef)))
    pred = np.array(rows) @ coef
    print("fitted wall / measured: " + ", ".join(f"{p / w:.2f}" for p, w in zip(pred, walls)))


if __name__ == "__main__":
    main()
