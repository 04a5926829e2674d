"""Finite transformers' tangent kernels against the limiting one, 1/d attention
(docs/results.md#transformer-ntk; docs/theory.md §17.6).

    python studies/transformer_ntk.py [--widths 256,512,1024,2048,4096] [--seeds 8]
                                      [--json out.json] [--quick]

On 2 training sequences of the package's Markov task (V = 8, S = 4; R = 8 rows), tanh
MLPs, causal 1/d attention, μP: K = 1 and 2 blocks × H = 1 and 4 heads.  Per configuration
and width, ``--seeds`` networks' tangent kernels K_vv'(a, b) (R V × R V, the words' cross
terms included) against the limit δ_vv' K(a, b):

* the fitted exponent of the rms distance of each network's kernel to the limit, with its
  95 % interval (per-seed slopes, seeds − 1 degrees of freedom), and that distance at the
  widest width relative to the kernel's rms;
* at the widest width the z-scores of the seeds' mean, (mean − limit)/SE on seeds − 1
  degrees of freedom: their largest magnitude over the entries against the Bonferroni bound
  at 1 % (t quantile at 1 − 0.005/entries), and their root mean square (about
  √((s−1)/(s−3)) when the mean is unbiased);
* the queries' and keys' share at the widest width (0 in the limit) relative to the kernel.

Rows go to the JSON file as they finish (a temporary file renamed into place).
"""
import argparse
import time

import numpy as np
from scipy.stats import t as student

from tp_limits.analysis.fits import width_exponent
from tp_limits.engine.atomic import write_json
from tp_limits.transformer import (Transformer, empirical_transformer_ntk, markov_task,
                                   transformer_ntk)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="256,512,1024,2048,4096")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--json", default="transformer_ntk.json")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    widths = [int(w) for w in a.widths.split(",")]
    seeds = a.seeds
    if a.quick:
        widths, seeds = [32, 64, 128], 4
    tokens = markov_task(vocab=8, seq_len=4, n_train=2, n_eval=1, seed=1).tokens
    print(f"| K | H | slope (95 %) | rel. distance at n = {widths[-1]} | max abs z | "
          "Bonferroni bound | rms z | Q, K share | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for K in (1, 2):
        for H in (1, 4):
            model = Transformer(8, 4, blocks=K, heads=H, phi="tanh")
            t0 = time.time()
            limit = np.einsum("ab,vw->avbw", transformer_ntk(model, tokens), np.eye(8))
            scale = np.sqrt(np.mean(limit ** 2))
            dist = np.zeros((len(widths), seeds))
            for i, n in enumerate(widths):
                kernels = []
                qk = 0.0
                for s in range(seeds):
                    c = empirical_transformer_ntk(model, tokens, n, seed=s, components=True)
                    kernels.append(sum(c.values()))
                    qk += np.sqrt(np.mean((c["Q1"] + c["K1"]) ** 2)) / seeds / scale
                kernels = np.stack(kernels)
                dist[i] = np.sqrt(np.mean((kernels - limit) ** 2, axis=(1, 2, 3, 4)))
            slope, half = width_exponent(widths, dist)
            mean = kernels.mean(axis=0)
            se = kernels.std(axis=0, ddof=1) / np.sqrt(seeds)
            fixed = se == 0
            exact = bool(np.array_equal(mean[fixed], limit[fixed]))
            z = (mean - limit)[~fixed] / se[~fixed]
            bound = float(student.ppf(1 - 0.005 / z.size, seeds - 1))
            row = dict(K=K, H=H, slope=slope, half=half,
                       rel=float(np.sqrt(np.mean(dist[-1] ** 2)) / scale),
                       max_z=float(np.abs(z).max()), bound=bound,
                       rms_z=float(np.sqrt(np.mean(z ** 2))), qk=float(qk),
                       exact_zeros=exact, seconds=time.time() - t0, widths=widths,
                       dist=dist.tolist())
            print(f"| {K} | {H} | {slope:+.3f} ± {half:.3f} | {row['rel']:.4f} | "
                  f"{row['max_z']:.2f} | {bound:.2f} | {row['rms_z']:.2f} | "
                  f"{qk:.1e} | {row['seconds']:.0f} |", flush=True)
            rows.append(row)
            write_json(a.json, rows)


if __name__ == "__main__":
    main()
