"""A Muon limit step against an SGD limit step: the deep Monte Carlo engine at the same
N, L, B, E and T (docs/theory.md §11.4; docs/performance.md).

    python benchmarks/bench_muon.py [--N 100000] [--L 3] [--B 4] [--E 8] [--T 200]
                                    [--dtype float32] [--rounds 2]

bench_deep.py's routine (μP, tanh, d = 2, a new input every step).  Muon adds, per step
and hidden matrix, the k × k core of its buffer (k = B·t stored pairs: O(k³)) and the
pair sums with a full matrix (O(k² (B + E))); SGD's work per step is O(N k (B + E)).
Each optimizer runs ``--rounds`` times, alternating; the best times and their ratio are
printed.
"""
import argparse
import json
import time

import numpy as np

import tp_limits as tp


def routine(T, B, E, optimizer):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((T * B, 2)) / np.sqrt(2)
    Y = np.tanh(X[:, :1] - X[:, 1:])
    return tp.Routine(X, Y, lr=0.05, batch_size=B, optimizer=optimizer,
                      eval_inputs=rng.standard_normal((E, 2)) / np.sqrt(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", type=int, default=100_000)
    ap.add_argument("--L", type=int, default=3)
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--E", type=int, default=8)
    ap.add_argument("--T", type=int, default=200)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    cases = {"sgd": (tp.MLP(tp.mup(a.L), 2, 1, phi="tanh"), None),
             "muon": (tp.MLP(tp.mup(a.L, optimizer="muon"), 2, 1, phi="tanh"), tp.Muon())}
    best = {}
    for _ in range(a.rounds):
        for name, (net, opt) in cases.items():
            t0 = time.perf_counter()
            tp.simulate_limit(net, routine(a.T, a.B, a.E, opt), particles=a.N, replicates=1,
                              record=(), dtype=np.dtype(a.dtype), time_budget=None)
            best[name] = min(best.get(name, np.inf), time.perf_counter() - t0)
    out = {**vars(a), "sgd_s": round(best["sgd"], 2), "muon_s": round(best["muon"], 2),
           "muon_over_sgd": round(best["muon"] / best["sgd"], 3)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
