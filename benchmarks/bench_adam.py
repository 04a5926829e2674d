"""Cost per step of the deep Adam limit against N and the partner count M.

    python benchmarks/bench_adam.py [--Ns 5000,20000,50000] [--Ms 32,128,512] [--L 2]
                                    [--B 4] [--E 8] [--T 10]

μP-Adam, tanh, d = 2, d_out = 1, a random regression routine (fixed seed), one
replicate without the M/2M extrapolation (so each number is one run with M
partners), and beside it the SGD engine on the same routine and particles.  Per
(N, M) it prints seconds per step, the ratio to the SGD step, and the Adam
part's time per pair-entry, (t_Adam − t_SGD) / (N · M · (L − 1)): the partner
terms cost O(N M (B + E)) per hidden layer and step (docs/theory.md §10.6), so
that last column should be roughly flat when they dominate.
"""
import argparse
import time

import numpy as np

import tp_limits as tp


def routine(B, E, T, optimizer=None):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((T * B, 2)) / np.sqrt(2)
    Y = np.tanh(X[:, :1] - X[:, 1:])
    return tp.Routine(X, Y, lr=0.05, batch_size=B, optimizer=optimizer,
                      eval_inputs=rng.standard_normal((E, 2)) / np.sqrt(2))


def per_step(net, r, **kw):
    t0 = time.perf_counter()
    tp.simulate_limit(net, r, replicates=1, record=(), **kw)
    return (time.perf_counter() - t0) / r.steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--Ns", default="5000,20000,50000")
    ap.add_argument("--Ms", default="32,128,512")
    ap.add_argument("--L", type=int, default=2)
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--E", type=int, default=8)
    ap.add_argument("--T", type=int, default=10)
    a = ap.parse_args()
    adam = tp.MLP(tp.mup(a.L, optimizer="adam"), 2, 1, phi="tanh")
    sgd = tp.MLP(tp.mup(a.L), 2, 1, phi="tanh")
    r_adam = routine(a.B, a.E, a.T, tp.Adam(eps=1e-4))
    r_sgd = routine(a.B, a.E, a.T)
    per_step(adam, r_adam, particles=1000, partners=8, debias_partners=False)   # warm up
    print(f"L = {a.L}, B = {a.B}, E = {a.E}, T = {a.T}")
    print(f"{'N':>7} {'M':>5} {'Adam s/step':>12} {'SGD s/step':>11} {'ratio':>6} "
          f"{'ns per pair-entry':>18}")
    for N in (int(x) for x in a.Ns.split(",")):
        t_sgd = per_step(sgd, r_sgd, particles=N)
        for M in (int(x) for x in a.Ms.split(",")):
            if M > N:
                continue
            t = per_step(adam, r_adam, particles=N, partners=M, debias_partners=False)
            pair = (t - t_sgd) / (N * M * (a.L - 1)) * 1e9
            print(f"{N:>7} {M:>5} {t:>12.4f} {t_sgd:>11.4f} {t / t_sgd:>6.1f} {pair:>18.2f}")


if __name__ == "__main__":
    main()
