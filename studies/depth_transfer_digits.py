"""Depth transfer on real data: the optimal learning rate at infinite width for K = 2, 4, 8
residual blocks under three depth rules, on scikit-learn's digits (docs/theory.md §12.4).

    python studies/depth_transfer_digits.py [--Ks 2,4,8] [--particles 4000]

μP-SGD, tanh, three classes of the 8 × 8 digits, 8 steps of batch 8, held-out
cross-entropy on 40 test images (the task of examples/experiments/lr_sweep_digits.toml);
the limit by Monte Carlo (N particles × 4 replicates); a 2× grid of rates 2…128 with the
optimum searched around the grid's best (lr_sweep's default).  Prints η* with its 95 %
interval per rule and K, and the slope of log η* in log K.
"""
import argparse
import time
import warnings

import numpy as np

import tp_limits as tp

RULES = {"Depth-μP (α = ½, γ = 0)": tp.Residual.depth_mup("sgd"),
         "α = 1, γ = −1": tp.Residual(1.0, -1.0),
         "α = 1, γ = 0": tp.Residual(1.0, 0.0)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--Ks", default="2,4,8")
    ap.add_argument("--particles", type=int, default=4000)
    args = ap.parse_args()
    Ks = [int(k) for k in args.Ks.split(",")]
    r = tp.datasets.digits(classes=3).routine(lr=1.0, batch_size=8, steps=8, n_eval=40)
    print("| rule | " + " | ".join(f"K = {K}" for K in Ks) + " | slope of log η* |")
    print("|---|" + "---|" * (len(Ks) + 1))
    for name, res in RULES.items():
        t0 = time.perf_counter()
        net = tp.MLP(tp.mup(1 + Ks[0]), 64, 3, phi="tanh", residual=res)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = tp.depth_sweep(net, r, [2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0], Ks,
                                metric="eval_loss", particles=args.particles, replicates=4,
                                executor="serial", progress=False)
        cells = []
        for K in Ks:
            eta, lo, hi = ds.optimal_lr[K].get("inf", (np.nan,) * 3)
            cells.append(f"{eta:.2f} [{lo:.2f}, {hi:.2f}]")
        print(f"| {name} | " + " | ".join(cells) + f" | {ds.slope():+.2f} |  "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
