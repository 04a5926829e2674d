"""Time to a given accuracy: antithetic, plain and quasi-Monte Carlo particles.

    python benchmarks/bench_qmc.py [--example one_hidden|deep] [--Ns 10,12,14,16,18]
                                   [--target 1e-4]

``one_hidden``: the README's example (μP, tanh, d = 2, d_out = 1, data D1,
3 steps), against a 300³-node quadrature reference.  ``deep``: the demo's
experiment (μP, L = 2, tanh, teacher data, batch 1, 16 steps), against a
QMC run with 2^20 particles, or 4 times the largest N (its own standard
error is printed).

For each sampler and N = 2^k: 8 replicates (independent draws, or
independent scramblings of one Sobol' set), their standard error of f̊ (the
largest over steps >= 1 and eval inputs, 7 degrees of freedom), the largest
|f̊ − reference| and the wall time of the 8 replicates.  The fitted slope of
log SE against log N gives each sampler's rate; the N that reaches the target
standard error, and its time, come from the fits (SE = a N^s, time = b N).
"""
import argparse
import time

import numpy as np

import tp_limits as tp

SAMPLERS = ("mc", "antithetic", "qmc")


def one_hidden_example():
    X = np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 0.0]])
    Y = np.array([[1.0], [-1.0], [1.0]])
    data = tp.Routine(X, Y, lr=0.5, eval_inputs=[[1, 0], [0.6, 0.8], [1, 1]])
    net = tp.MLP(tp.mup(1), d_in=2, d_out=1, phi="tanh")
    ref = tp.simulate_limit(net, data, method="quadrature", particles=300 ** 3)
    return net, data, ref, "quadrature, 300³ nodes"


def deep_example(largest: int):
    from tp_limits.experiment.runner import build, demo_config
    exp = build(demo_config())
    n = max(2 ** 20, 4 * largest)
    ref = tp.simulate_limit(exp.net, exp.routine, particles=n, replicates=8, seed=99,
                            record=())
    return exp.net, exp.routine, ref, f"QMC with N = {n:,}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--example", choices=("one_hidden", "deep"), default="one_hidden")
    ap.add_argument("--Ns", default=None, help="exponents k of N = 2^k")
    ap.add_argument("--target", type=float, default=1e-4)
    args = ap.parse_args()
    Ns = [2 ** int(k) for k in (args.Ns or "10,12,14,16,18").split(",")]
    net, data, ref, what = (one_hidden_example() if args.example == "one_hidden"
                            else deep_example(Ns[-1]))
    print(f"reference: {what}; its error bar {np.max(ref.f_eval_se[1:]):.1e}\n")
    print("| sampler | N | SE (7 dof) | max error vs reference | time of 8 replicates (s) |\n"
          "|---|---|---|---|---|")
    fits, se_last = {}, {}
    for sampler in SAMPLERS:
        tp.simulate_limit(net, data, particles=1024, sampler=sampler, replicates=2)  # warm-up
        se, wall = [], []
        for N in Ns:
            t0 = time.perf_counter()
            tr = tp.simulate_limit(net, data, particles=N, sampler=sampler, replicates=8,
                                   seed=1, record=())
            wall.append(time.perf_counter() - t0)
            se.append(float(np.max(tr.f_eval_se[1:])))
            err = float(np.max(np.abs(tr.f_eval[1:] - ref.f_eval[1:])))
            print(f"| {sampler} | {N:,} | {se[-1]:.2e} | {err:.2e} | {wall[-1]:.3f} |",
                  flush=True)
        slope, icpt = np.polyfit(np.log(Ns), np.log(se), 1)
        per_particle = np.median(np.array(wall) / np.array(Ns))
        n_target = (args.target / np.exp(icpt)) ** (1 / slope)
        fits[sampler] = (slope, n_target, n_target * per_particle)
        se_last[sampler] = se[-1]
    print(f"\n| sampler | SE slope in N | N for SE = {args.target:g} | seconds |\n"
          "|---|---|---|---|")
    for sampler, (slope, n, sec) in fits.items():
        print(f"| {sampler} | {slope:.2f} | {n:.2e} | {sec:.2f} |")
    print(f"\nstandard error at N = {Ns[-1]:,} relative to plain MC: "
          + ", ".join(f"{s} {se_last[s] / se_last['mc']:.3f}" for s in SAMPLERS))
    base = fits["mc"][2]
    print("\nspeed-up in seconds to the target over plain MC: "
          + ", ".join(f"{s} {base / f[2]:.0f}×" for s, f in fits.items()))


if __name__ == "__main__":
    main()
