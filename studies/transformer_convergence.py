"""Finite μP transformers against their infinite-width limit under SGD
(docs/results.md#transformer-convergence; docs/theory.md §17.4–17.5).

    python studies/transformer_convergence.py [--widths 256,512,1024,2048,4096] [--seeds 8]
                                              [--steps 10] [--particles 16384]
                                              [--replicates 8] [--json out.json] [--quick]

On the package's Markov task (V = 8, S = 4, order 2; 4 training and 2 evaluation
sequences), tanh MLPs, 1/d attention, causal, SGD at η = 0.5 for ``--steps`` steps: K = 1
and 2 blocks × H = 1 and 4 heads (the limit does not depend on H).  Reported per
configuration: the fitted exponent of the rms distance of the networks' f_eval (every
evaluated output after step 0) to the limit's, with its 95 % interval (per-seed slopes,
seeds − 1 degrees of freedom); the rms distance at the widest width; and there the z-scores
of the seeds' mean against the limit, gap / √(sd²/seeds + SE_limit²): their root mean
square (about 1 when the mean is unbiased) and their largest magnitude over the E·V·T
outputs.  Rows go to the JSON file as they finish (a temporary file renamed into place).
"""
import argparse
import time

import numpy as np

from tp_limits.analysis.fits import width_exponent
from tp_limits.engine.atomic import write_json
from tp_limits.transformer import (Transformer, markov_task, simulate_transformer_limit,
                                   train_transformer)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="256,512,1024,2048,4096")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--particles", type=int, default=16384)
    ap.add_argument("--replicates", type=int, default=8)
    ap.add_argument("--json", default="transformer_convergence.json")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    widths = [int(w) for w in a.widths.split(",")]
    seeds, steps, N, R = a.seeds, a.steps, a.particles, a.replicates
    if a.quick:
        widths, seeds, steps, N, R = [32, 64, 128], 3, 2, 512, 3
    task = markov_task(vocab=8, seq_len=4, n_train=4, n_eval=2, seed=1)
    print("| K | H | slope (95 %%) | rms at n = %d | rms z | max abs z (of %d) | limit s |"
          % (widths[-1], (steps) * task.eval_tokens.size * 8))
    print("|---|---|---|---|---|---|---|")
    rows = []
    for K in (1, 2):
        for H in (1, 4):
            model = Transformer(8, 4, blocks=K, heads=H, phi="tanh")
            t0 = time.time()
            limit = simulate_transformer_limit(model, task, 0.5, steps=steps, particles=N,
                                               replicates=R)
            t_limit = time.time() - t0
            dist = np.zeros((len(widths), seeds))
            for i, n in enumerate(widths):
                fs = np.stack([train_transformer(model, task, n, 0.5, steps=steps,
                                                 seed=s).f_eval for s in range(seeds)])
                dist[i] = np.sqrt(np.mean((fs - limit.f_eval[None]) ** 2, axis=(1, 2, 3)))
            slope, half = width_exponent(widths, dist)
            se = np.sqrt(fs.std(axis=0, ddof=1) ** 2 / seeds + limit.f_eval_se ** 2)
            z = ((fs.mean(axis=0) - limit.f_eval) / se)[1:]
            row = dict(K=K, H=H, slope=slope, half=half,
                       rms=float(np.sqrt(np.mean(dist[-1] ** 2))),
                       rms_z=float(np.sqrt(np.mean(z ** 2))), max_z=float(np.abs(z).max()),
                       limit_s=t_limit, widths=widths, dist=dist.tolist())
            print(f"| {K} | {H} | {slope:+.3f} ± {half:.3f} | {row['rms']:.4f} | "
                  f"{row['rms_z']:.2f} | {row['max_z']:.2f} | {t_limit:.0f} |", flush=True)
            rows.append(row)
            write_json(a.json, rows)


if __name__ == "__main__":
    main()
