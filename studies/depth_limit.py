"""Does the width limit settle as the depth grows?  The held-out loss of the trained
width limit for K = 2…64 residual blocks under three depth rules, with error bars
(docs/theory.md §12.4).

    python studies/depth_limit.py [--Ks 2,4,8,16,32,64] [--particles 32768]
                                     [--replicates 8] [--json out.json] [--plot out.png]

The task is §12.4's teacher (d = 4, a tanh teacher of 3 units, 8 steps of batch 4, 8
held-out inputs), μP-SGD, φ = tanh, η = 1.  The rules: Depth-μP (α = ½, γ = 0, blocks of
one), CompleteP (α = 1, γ = −1, blocks of two: L = 1 + 2K) and the standard residual
network (α = 0, γ = 0).  Each (rule, K) is the Monte Carlo limit run as R independent
replicates; the held-out loss is taken on their pooled outputs with the jackknife's
standard error (R − 1 degrees of freedom, tp_limits/analysis/pooling.py).  The cost per
step is linear in K (a block is one more vector sum and one more hidden matrix).  A run
that diverges is reported with the step and layer.  Rows are written to the JSON file as
they finish (a temporary file renamed into place), so an interrupted study keeps them.
"""
import argparse
import json
import time
import warnings

import numpy as np

import tp_limits as tp
from tp_limits.analysis.pooling import pool, pseudo_values
from tp_limits.engine.atomic import write_json
from tp_limits.spec import Problem

RULES = {"Depth-μP (α = ½, γ = 0)": tp.Residual.depth_mup("sgd"),
         "CompleteP (α = 1, γ = −1, blocks of 2)": tp.Residual.completep("sgd"),
         "α = 0, γ = 0": tp.Residual(0.0, 0.0)}


def teacher_routine():
    """§12.4's teacher task: unit-norm inputs in R⁴, targets of a tanh teacher."""
    rng = np.random.default_rng(0)
    d, B, T = 4, 4, 8
    X = rng.standard_normal((B * T, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    U = rng.standard_normal((3, d))
    a = np.array([[1.0], [-0.5], [0.8]])
    Xe = rng.standard_normal((8, d))
    Xe /= np.linalg.norm(Xe, axis=1, keepdims=True)
    return tp.Routine(X, np.tanh(X @ U.T) @ a, lr=1.0, batch_size=B, eval_inputs=Xe,
                      eval_targets=np.tanh(Xe @ U.T) @ a)


def held_out_loss(net, routine, particles, replicates):
    """(loss of the pooled outputs, its jackknife SE, None) or (nan, nan, divergence)."""
    runs = []
    for seed in range(replicates):
        tr = tp.simulate_limit(net, routine, particles=particles, replicates=1, seed=seed,
                               record=(), on_divergence="stop")
        if tr.interrupted:
            raise KeyboardInterrupt
        if tr.diverged:
            return np.nan, np.nan, str(tr.divergence)
        runs.append(tr)
    problem = Problem(net, routine)

    def measure(tr):
        return float(tr.stats["eval_loss"][-1])

    pv = pseudo_values(problem, runs, measure)
    return measure(pool(problem, runs)), float(np.std(pv, ddof=1) / np.sqrt(len(pv))), None


def plot(path, rows):
    """Left: the held-out loss against K; right: its change per doubling of K, |ℓ(K) −
    ℓ(K/2)|, on log axes (a limit in depth shows as a falling line); bars ± 2 SE."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, dx) = plt.subplots(1, 2, figsize=(9, 3.5))
    for rule in RULES:
        pts = [r for r in rows if r["rule"] == rule and r["loss"] == r["loss"]]
        if not pts:
            continue
        K = np.array([r["K"] for r in pts])
        loss, se = np.array([r["loss"] for r in pts]), np.array([r["se"] for r in pts])
        line = ax.errorbar(K, loss, yerr=2 * se, marker="o", capsize=3, label=rule)
        dx.errorbar(K[1:], np.abs(np.diff(loss)), yerr=2 * np.hypot(se[1:], se[:-1]),
                    marker="o", capsize=3, color=line[0].get_color())
    for a in (ax, dx):
        a.set_xscale("log", base=2)
        a.set_xlabel("residual blocks K")
    dx.set_yscale("log")
    ax.set_ylabel("held-out loss of the width limit")
    dx.set_ylabel("change from K/2 to K")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--Ks", default="2,4,8,16,32,64")
    ap.add_argument("--particles", type=int, default=32768)
    ap.add_argument("--replicates", type=int, default=8)
    ap.add_argument("--rules", default="0,1,2", help="indices into the three rules")
    ap.add_argument("--json", default="")
    ap.add_argument("--plot", default="")
    ap.add_argument("--replot", default="", help="draw --plot from this JSON file and stop")
    args = ap.parse_args()
    if args.replot:
        with open(args.replot) as fh:
            plot(args.plot or "depth_limit.png", json.load(fh))
        return
    Ks = [int(k) for k in args.Ks.split(",")]
    rules = [list(RULES)[int(i)] for i in args.rules.split(",")]
    routine = teacher_routine()
    rows = []
    print(f"N = {args.particles} particles × {args.replicates} replicates; SE with "
          f"{args.replicates - 1} degrees of freedom\n")
    print("| rule | K | held-out loss ± SE | change from the previous K (z) | time |")
    print("|---|---|---|---|---|")
    try:
        for rule in rules:
            res, prev = RULES[rule], None
            for K in Ks:
                net = tp.MLP(tp.mup(1 + res.block_depth * K), 4, 1, phi="tanh", residual=res)
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    loss, se, div = held_out_loss(net, routine, args.particles, args.replicates)
                dt = time.perf_counter() - t0
                rows.append(dict(rule=rule, K=K, loss=loss, se=se, divergence=div, seconds=dt))
                if div:
                    cell, change = f"diverged: {div}", ""
                else:
                    cell = f"{loss:.5f} ± {se:.5f}"
                    change = ""
                    if prev is not None:
                        d, s = loss - prev[0], np.hypot(se, prev[1])
                        change = f"{d:+.5f} ({d / s:+.1f})"
                    prev = (loss, se)
                print(f"| {rule} | {K} | {cell} | {change} | {dt:.0f} s |", flush=True)
                if args.json:
                    write_json(args.json, rows)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {len(rows)} rows finished"
              + (f" and saved in {args.json}" if args.json else ""))
    if args.plot and rows:
        plot(args.plot, rows)


if __name__ == "__main__":
    main()
