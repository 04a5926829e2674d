"""Time to a given accuracy: antithetic, plain and quasi-Monte Carlo initial particles.

    python benchmarks/bench_qmc.py [--Ns 10,12,14,16,18] [--target 1e-4]

The README's one-hidden-layer example (μP, tanh, d = 2, d_out = 1, data D1,
3 steps).  For each sampler and N = 2^k particles: 8 replicates (independent
draws, or independent scramblings of one Sobol' set), their standard error
of f̊ (the largest over steps and eval inputs, 7 degrees of freedom), the
largest |f̊ − reference| with the reference from a 300³-node quadrature, and
the wall time of the 8 replicates.  The fitted slope of log SE against log N
gives each sampler's rate; the N that reaches the target standard error,
and its time, come from the fits (SE = a N^s, time = b N).
"""
import argparse
import time

import numpy as np

import tp_limits as tp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--Ns", default="10,12,14,16,18", help="exponents k of N = 2^k")
    ap.add_argument("--target", type=float, default=1e-4)
    args = ap.parse_args()
    X = np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 0.0]])
    Y = np.array([[1.0], [-1.0], [1.0]])
    data = tp.Routine(X, Y, lr=0.5, eval_inputs=[[1, 0], [0.6, 0.8], [1, 1]])
    net = tp.MLP(tp.mup(1), d_in=2, d_out=1, phi="tanh")
    ref = tp.simulate_limit(net, data, method="quadrature", particles=300 ** 3)
    Ns = [2 ** int(k) for k in args.Ns.split(",")]
    print(f"reference: quadrature, error estimate {np.max(ref.f_eval_se):.1e}\n")
    print("| sampler | N | SE (7 dof) | max error vs reference | time of 8 replicates (s) |\n"
          "|---|---|---|---|---|")
    fits = {}
    for sampler in ("mc", "antithetic", "qmc"):
        tp.simulate_limit(net, data, particles=1024, sampler=sampler, replicates=2)  # warm-up
        se, wall = [], []
        for N in Ns:
            t0 = time.perf_counter()
            tr = tp.simulate_limit(net, data, particles=N, sampler=sampler, replicates=8,
                                   seed=1)
            wall.append(time.perf_counter() - t0)
            se.append(float(np.max(tr.f_eval_se[1:])))
            err = float(np.max(np.abs(tr.f_eval[1:] - ref.f_eval[1:])))
            print(f"| {sampler} | {N:,} | {se[-1]:.2e} | {err:.2e} | {wall[-1]:.3f} |",
                  flush=True)
        slope, icpt = np.polyfit(np.log(Ns), np.log(se), 1)
        per_particle = np.median(np.array(wall) / np.array(Ns))
        n_target = (args.target / np.exp(icpt)) ** (1 / slope)
        fits[sampler] = (slope, n_target, n_target * per_particle)
    print(f"\n| sampler | SE slope in N | N for SE = {args.target:g} | seconds |\n"
          "|---|---|---|---|")
    for sampler, (slope, n, sec) in fits.items():
        print(f"| {sampler} | {slope:.2f} | {n:.2e} | {sec:.2f} |")
    base = fits["mc"][2]
    print("\nspeed-up in seconds to the target over plain MC: "
          + ", ".join(f"{s} {base / f[2]:.0f}×" for s, f in fits.items()))


if __name__ == "__main__":
    main()
