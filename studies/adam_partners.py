"""The deep Adam limit at large learning rates: partner particles, their bias removal and
pooling against finite networks to width 16384 (docs/results.md, "Deep Adam: partner
particles").

    python studies/adam_partners.py [--quick]

μP-Adam (L = 2, tanh) on examples/experiments/lr_sweep_digits.toml's task (digits 0–2,
8 steps of batch 8, held-out cross-entropy on 40 images) at η = 2.83 and 5.66.  The limit
runs 8 replicates (seeds 0…7) of N particles with M partner particles, with and without
the bias removal of the partner term (``debias_partners``); "per replicate" is the mean
± standard error of each replicate's own held-out loss (biased upwards by the
replicate's noise, the loss being convex in f), "pooled" the loss of the replicates'
mean outputs with the jackknife's standard error (tp_limits/analysis/pooling.py); both
with 7 degrees of freedom.  The finite rows: mean ± standard error over seeds at each
width.  ``--quick`` runs N = 1000, two replicates and two small widths.
"""
import argparse
from pathlib import Path

import numpy as np

import tp_limits as tp
from tp_limits.analysis.pooling import replicate_values
from tp_limits.experiment import load
from tp_limits.spec import Problem

ROOT = Path(__file__).resolve().parents[1]


def measure(tr):
    return float(tr.stats["eval_loss"][-1])


def mean_se(values) -> str:
    v = np.asarray(values, float)
    return f"{v.mean():.3f} ± {v.std(ddof=1) / np.sqrt(len(v)):.3f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    exp = load(ROOT / "examples" / "experiments" / "lr_sweep_digits.toml")
    base = exp.routine
    net = tp.MLP(tp.mup(2, optimizer="adam"), exp.net.d_in, exp.net.d_out, phi="tanh")
    limits = ((4_000, 256, True), (16_000, 256, True), (16_000, 1024, True),
              (16_000, 1024, False), (32_000, 1024, True))
    finite = ((512, 16), (1024, 16), (2048, 16), (4096, 12), (8192, 8), (16384, 6))
    R = 8
    if args.quick:
        limits, finite, R = ((1_000, 64, True), (1_000, 64, False)), ((64, 2), (128, 2)), 2
    print("| η | side | N | M | debias | per replicate | pooled |")
    print("|---|---|---|---|---|---|---|")
    for lr in (2.83, 5.66):
        routine = tp.Routine(base.X, base.Y, lr=lr, loss="xent", batch_size=8, steps=8,
                             eval_inputs=base.eval_inputs, eval_targets=base.eval_targets,
                             optimizer=tp.Adam())
        problem = Problem(net, routine)
        for N, M, debias in limits:
            runs = [tp.simulate_limit(net, routine, particles=N, replicates=1, seed=r,
                                      partners=M, debias_partners=debias, record=())
                    for r in range(R)]
            pooled = replicate_values(problem, runs, measure)
            print(f"| {lr} | limit | {N:,} | {M} | {'yes' if debias else 'no'} | "
                  f"{mean_se([measure(t) for t in runs])} | {mean_se(pooled)} |", flush=True)
        cells = [mean_se([measure(tp.train_finite(net, routine, w, seed=s, record=()))
                          for s in range(seeds)]) for w, seeds in finite]
        print(f"| {lr} | finite | n = {', '.join(str(w) for w, _ in finite)} | | | "
              f"{', '.join(cells)} (seeds {', '.join(str(s) for _, s in finite)}) | |",
              flush=True)


if __name__ == "__main__":
    main()
