"""The one-hidden-layer sweep with each of its pre-activation tiles, end to end.

    python benchmarks/bench_tiles.py [--Ns 1e6,1e7] [--ds 1,4,16] [--Bs 1,16] [--E 4]
                                     [--rounds 3]

The sweep (tanh, plain SGD, d_out = 1, E evaluation inputs every step, float64) is
timed with the register tiles written as LLVM IR (``ir``), their plain-Numba twin
(``plain``) and the plain twin with a software prefetch in the fused update
(``prefetch``), without and with the φ cache, all in one process, the variants
alternating within each round; each column is the best time over the rounds (on a
shared machine other load only adds time).  Printed: particle-steps per second of
each, and the ratio of the IR's to the better plain variant — the number
docs/performance.md's choice of tiles rests on (tiling.py).
"""
import argparse
import time

import numpy as np
from bench_limit import problem

from tp_limits.limit.fused.contract import SweepData, sweep_args
from tp_limits.limit.fused.sweep import sweep
from tp_limits.limit.fused.tiling import TILES
from tp_limits.spec.optimizers import SGD


def configuration(N, d, B, E, rounds):
    """{(tiles, cached): best seconds per sweep}."""
    U, V, w, Xb, Xn, Xe, chi, block, out, cache = problem(N, d, B, E)
    sgd = SGD()
    h = sgd.coordinate(0.1, 1.0, 0.0, 1)[1]

    def step(tiles, cached):
        out[:] = 0.0
        data = SweepData(U, V, w, U, Xb, chi, 0.1, 0.1, Xn, Xe, False, block,
                         cache=cache if cached else None, cached=cached)
        sweep(sweep_args(data, sgd, h, h, "tanh", tiles=tiles), out)

    keys = [(t, c) for t in TILES for c in (False, True)]
    for k in keys:
        step(*k)                        # compile (or load), fill the cache
    best = dict.fromkeys(keys, np.inf)
    for _ in range(rounds):
        for k in keys:
            reps = 0
            t_end = time.perf_counter() + 0.3
            while reps < 2 or time.perf_counter() < t_end:
                t0 = time.perf_counter()
                step(*k)
                best[k] = min(best[k], time.perf_counter() - t0)
                reps += 1
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--Ns", default="1e6,1e7")
    ap.add_argument("--ds", default="1,4,16")
    ap.add_argument("--Bs", default="1,16")
    ap.add_argument("--E", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    Ns = [int(float(x)) for x in args.Ns.split(",")]
    ds = [int(x) for x in args.ds.split(",")]
    Bs = [int(x) for x in args.Bs.split(",")]
    head = " | ".join(f"{t}{' cached' if c else ''}" for c in (False, True) for t in TILES)
    print(f"| N | d | B | {head} | ir / plain | ir / plain, cached |")
    print("|" + "---|" * (5 + 2 * len(TILES)))
    for N in Ns:
        for d in ds:
            for B in Bs:
                best = configuration(N, d, B, args.E, args.rounds)
                rate = {k: N / v / 1e6 for k, v in best.items()}
                cols = " | ".join(f"{rate[(t, c)]:.1f}" for c in (False, True) for t in TILES)
                ratio = [rate[("ir", c)] / max(rate[("plain", c)], rate[("prefetch", c)])
                         for c in (False, True)]
                print(f"| {N:,} | {d} | {B} | {cols} | {ratio[0]:.2f} | {ratio[1]:.2f} |",
                      flush=True)


if __name__ == "__main__":
    main()
