"""Does a spectral transform of Adam's direction have a width limit?  (docs/theory.md §11.7)

Finite tanh networks (μP-spectral, L = 2, d = 3, d_out = 2, batch 2 of the N8 batches,
η = 0.05, 4 steps) trained with SpectralUpdate over Adam — msign by Newton–Schulz (5
steps), the exact msign, and spectral normalization — and, as the control whose limit
exists, spectral normalization over Nesterov momentum.  For each width the seed mean of
the final outputs on the evaluation inputs and its standard error (seeds − 1 degrees of
freedom); "step" is the RMS change of that mean from the previous width in units of the
combined standard error, "seed SD × √n" the RMS over outputs of the seeds' standard
deviation times √n (constant when the outputs concentrate like n^(−1/2) around a
deterministic value), and "slope" the least-squares exponent of the RMS change
against the width (a sequence that converges like n^(−1/2) has slope −½; one that does
not converge, none).

    python studies/spectral_adam.py [--widths 128 256 512 1024 2048] [--seeds 8]
                                    [--rules ns5 exact sn control] [--backend cupy]

Widths to 8192 need an n × n SVD or Newton–Schulz iterations per hidden matrix and step:
hours on two cores, minutes on a GPU (``--backend cupy``; ``SPECTRAL_ADAM=1`` in
benchmarks/gpu_check.sh runs it there).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import N8_LONG  # noqa: E402

import tp_limits as tp  # noqa: E402

RULES = {
    "ns5": ("msign(Adam), Newton–Schulz 5", tp.SpectralUpdate(tp.Adam(), "msign")),
    "exact": ("msign(Adam), exact", tp.SpectralUpdate(tp.Adam(), "msign", ns_steps=None)),
    "sn": ("SN(Adam)", tp.SpectralUpdate(tp.Adam(), "sn")),
    "control": ("SN(SGD-Nesterov), control",
                tp.SpectralUpdate(tp.SGD(momentum=0.9, nesterov=True), "sn")),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[128, 256, 512, 1024, 2048])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rules", nargs="+", choices=tuple(RULES), default=list(RULES))
    ap.add_argument("--backend", choices=("numpy", "cupy"), default="numpy")
    args = ap.parse_args(argv)
    net = tp.MLP(tp.mup(2, optimizer="muon"), 3, 2, phi="tanh")
    print("| rule | width | seed-mean f (first entry) | SE | seed SD × √n | step (SE) | "
          "RMS change |")
    print("|---|---|---|---|---|---|---|")
    for label, opt in (RULES[k] for k in args.rules):
        X = np.vstack([N8_LONG["X"]] * args.steps)[: 2 * args.steps]
        Y = np.vstack([N8_LONG["Y"]] * args.steps)[: 2 * args.steps]
        r = tp.Routine(X, Y, lr=0.05, batch_size=2, eval_inputs=N8_LONG["eval_inputs"],
                       optimizer=opt)
        prev, changes = None, []
        t0 = time.perf_counter()
        for n in args.widths:
            F = np.array([tp.train_finite(net, r, n, seed=s, record=(),
                                          backend=args.backend).f_eval[-1]
                          for s in range(args.seeds)])
            mean, se = F.mean(0), F.std(0, ddof=1) / np.sqrt(args.seeds)
            step = change = ""
            if prev is not None:
                d = mean - prev[0]
                change_v = float(np.sqrt(np.mean(d ** 2)))
                changes.append((n, change_v))
                step = f"{np.sqrt(np.mean((d / np.hypot(se, prev[1])) ** 2)):.1f}"
                change = f"{change_v:.2e}"
            sd = float(np.sqrt(np.mean(F.var(0, ddof=1)))) * np.sqrt(n)
            print(f"| {label} | {n} | {mean.flat[0]:+.5f} | {se.flat[0]:.5f} | {sd:.3f} | "
                  f"{step} | {change} |", flush=True)
            prev = (mean, se)
        if len(changes) >= 2:
            x, y = np.log([c[0] for c in changes]), np.log([c[1] for c in changes])
            slope = np.polyfit(x, y, 1)[0]
            print(f"| {label} | slope of the RMS change | {slope:+.2f} | "
                  f"({len(changes)} changes, {time.perf_counter() - t0:.0f} s) | | | |",
                  flush=True)


if __name__ == "__main__":
    main()
