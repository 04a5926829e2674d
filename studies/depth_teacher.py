"""Depth in the width limit on a teacher task (docs/results.md, "Depth in the width
limit: a teacher task").

    python studies/depth_teacher.py loss        [--Ks 2,4,8,16,32]
    python studies/depth_teacher.py transfer    [--Ks 2,4,8,16,32] [--particles 4000] [--quick]
    python studies/depth_teacher.py notebook11  [--Ks 2,4,8]

The task: d = 4 inputs on the sphere of radius 1, a teacher of 3 tanh units
y = v·tanh(2 W x)/√3 (W, v standard normal, seed 0), 8 steps of batch 4 and 8 held-out
inputs with their teacher targets; μP-SGD with residual blocks (L = 1 + K).

``loss``: the exact linear limit (φ = id) at η = 0.1, the held-out loss after training per
number of blocks K, under Depth-μP (α = ½, γ = 0) and under α = 1, γ = −1 (the rule that
keeps the blocks' summed SGD update Θ(1) with one-layer branches).  ``transfer``:
``tp.depth_sweep`` of the tanh network (the Monte Carlo limit, N particles × 4 replicates,
a 2× grid of 15 rates from ¼ to 4096, 6 searched rates per minimum) under those two rules
and α = 1, γ = 0: η* with its 95 % interval per K and the slope of log η* in log K.
``notebook11``: the linear teacher of examples/11_depth.ipynb (d = 4, targets
tanh(2 ξ·w), 24 training points in batches of 4, 6 steps, 16 held-out inputs; its random
draws in its order), the exact linear limit, η* from a 2× grid of 6 rates from ⅛ to 4
(exact: no error bars) under Depth-μP and α = 1, γ = −1.
"""
import argparse
import warnings

import numpy as np

import tp_limits as tp

RULES = {"Depth-μP (α = ½, γ = 0)": tp.Residual.depth_mup("sgd"),
         "α = 1, γ = −1": tp.Residual(1.0, -1.0),
         "α = 1, γ = 0": tp.Residual(1.0, 0.0)}


def task(lr):
    rng = np.random.default_rng(0)
    d = 4
    W, v = rng.standard_normal((3, d)), rng.standard_normal(3)
    X = rng.standard_normal((40, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    Y = (np.tanh(2 * X @ W.T) @ v / np.sqrt(3))[:, None]
    return tp.Routine(X[:32], Y[:32], lr=lr, batch_size=4, eval_inputs=X[32:],
                      eval_targets=Y[32:])


def loss(Ks):
    r = task(0.1)
    print("| rule | " + " | ".join(f"K = {K}" for K in Ks) + " |")
    print("|---|" + "---|" * len(Ks))
    for name in ("Depth-μP (α = ½, γ = 0)", "α = 1, γ = −1"):
        cells = []
        for K in Ks:
            net = tp.MLP(tp.mup(1 + K), 4, 1, phi="id", residual=RULES[name])
            tr = tp.simulate_limit(net, r)
            cells.append(f"{float(tr.stats['eval_loss'][-1]):.4f}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def transfer(Ks, particles):
    r = task(1.0)
    print("| rule | " + " | ".join(f"K = {K}" for K in Ks) + " | slope of log η* |")
    print("|---|" + "---|" * (len(Ks) + 1))
    for name, res in RULES.items():
        net = tp.MLP(tp.mup(1 + Ks[0]), 4, 1, phi="tanh", residual=res)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ds = tp.depth_sweep(net, r, 2.0 ** np.arange(-2, 13), Ks, metric="eval_loss",
                                particles=particles, replicates=4, refine=6, progress=True)
        cells = []
        for K in Ks:
            lr, lo, hi = ds.optimal_lr[K]["inf"]
            cells.append(f"{lr:.3f} [{lo:.3f}, {hi:.3f}]")
        print(f"| {name} | " + " | ".join(cells) + f" | {ds.slope():+.2f} |", flush=True)


def notebook11(Ks):
    rng = np.random.default_rng(0)
    rng.standard_normal((8, 3))                 # the notebook's coordinate-check inputs
    d = 4
    Wt = rng.standard_normal((d, 1)) / np.sqrt(d)
    X = rng.standard_normal((24, d)) / np.sqrt(d)
    Xe = rng.standard_normal((16, d)) / np.sqrt(d)
    r = tp.Routine(X, np.tanh(2 * X @ Wt), lr=0.5, batch_size=4, eval_inputs=Xe,
                   eval_targets=np.tanh(2 * Xe @ Wt))
    print("| rule | " + " | ".join(f"K = {K}" for K in Ks) + " | slope of log η* |")
    print("|---|" + "---|" * (len(Ks) + 1))
    for name in ("Depth-μP (α = ½, γ = 0)", "α = 1, γ = −1"):
        net = tp.MLP(tp.mup(1 + Ks[0]), d, 1, phi="id", residual=RULES[name])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ds = tp.depth_sweep(net, r, 2.0 ** np.arange(-3, 3), Ks, metric="eval_loss",
                                progress=False)
        cells = [f"{ds.optimal_lr[K]['inf'][0]:.3f}" for K in Ks]
        print(f"| {name} | " + " | ".join(cells) + f" | {ds.slope():+.2f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("table", choices=("loss", "transfer", "notebook11"))
    ap.add_argument("--Ks", default="2,4,8,16,32")
    ap.add_argument("--particles", type=int, default=4000)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    Ks = [int(k) for k in args.Ks.split(",")]
    if args.quick:
        Ks, args.particles = Ks[:2], 500
    if args.table == "loss":
        loss(Ks)
    elif args.table == "transfer":
        transfer(Ks, args.particles)
    else:
        notebook11(Ks if args.Ks != "2,4,8,16,32" else [2, 4, 8])


if __name__ == "__main__":
    main()
