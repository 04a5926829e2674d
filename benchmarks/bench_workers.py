"""Replicates of the deep Monte Carlo limit in worker processes vs in this process.

    python benchmarks/bench_workers.py

μP, L = 3, tanh, B = 4, E = 8, T = 25, 4 replicates; wall time with
``workers=1`` and ``workers=2`` (process start-up included) for two N.
"""
import time

import numpy as np

import tp_limits as tp


def main():
    rng = np.random.default_rng(0)
    B, E, T = 4, 8, 25
    X = rng.standard_normal((T * B, 2)) / np.sqrt(2)
    Y = np.tanh(X[:, :1] - X[:, 1:])
    r = tp.Routine(X, Y, lr=0.1, batch_size=B,
                   eval_inputs=rng.standard_normal((E, 2)) / np.sqrt(2))
    net = tp.MLP(tp.mup(3), 2, 1, phi="tanh")
    for N in [20_000, 100_000]:
        out = {}
        for w in [1, 2]:
            t = time.perf_counter()
            tp.simulate_limit(net, r, particles=N, replicates=4, record=(), workers=w)
            out[w] = time.perf_counter() - t
        print(f"N={N}: workers=1 {out[1]:.2f} s, workers=2 {out[2]:.2f} s, "
              f"speedup {out[1] / out[2]:.2f}")
if __name__ == "__main__":
    main()
