"""The one-hidden-layer sweep with its particles on cache lines, against 16 bytes off.

    python benchmarks/bench_aligned.py [--N 1e6] [--ds 1,4,16] [--Bs 1,16] [--rounds 10]

The engine places Z^U, Z^{nV}, the optimizer state and the φ cache on 64-byte
lines (engine/aligned.py); NumPy's own large arrays start 16 bytes past a page.
Both layouts are timed in alternated rounds in one run (tanh, d_out = 1, E = 4,
float64, one sweep per call, the best call per layout), with and without the
φ cache, and the ratio aligned / off-line is printed: noise on a shared machine
moves both columns of a round together.
"""
import argparse
import time

import numpy as np

from tp_limits.engine.aligned import LINE, empty_aligned
from tp_limits.limit.fused.blocks import block_size
from tp_limits.limit.fused.columns import n_columns
from tp_limits.limit.fused.contract import SweepData, sweep_args
from tp_limits.limit.fused.phi import cache_planes
from tp_limits.limit.fused.sweep import sweep
from tp_limits.spec.optimizers import SGD


def placed(values: np.ndarray, offset: int) -> np.ndarray:
    """A copy of ``values`` whose data start ``offset`` bytes past a cache line."""
    raw = empty_aligned((values.size + LINE // 8,), np.float64)
    start = offset // 8
    out = raw[start:start + values.size].reshape(values.shape)
    out[...] = values
    return out


def configuration(N, d, B, E, rounds):
    """{(offset, cached): best seconds per sweep} for offsets 0 and 16 bytes."""
    rng = np.random.default_rng(0)
    U0 = rng.standard_normal((d, N)) / np.sqrt(d)
    V0 = rng.standard_normal((1, N))
    arrays = {off: (placed(U0, off), placed(V0, off),
                    placed(np.zeros((cache_planes("tanh"), B, N)), off)) for off in (0, 16)}
    w = np.full(1, 1.0 / N)
    Xb, Xn, Xe = (rng.standard_normal((k, d)) for k in (B, B, E))
    chi = 1e-6 * rng.standard_normal((B, 1))
    block = block_size(d, 1, B, E, N)
    out = np.zeros(((N + block - 1) // block, n_columns(B, E, 1, False)))
    sgd = SGD()
    h = sgd.coordinate(1e-3, 1.0, 0.0, 1)[1]

    def step(off, cached):
        U, V, cache = arrays[off]
        out[:] = 0.0
        data = SweepData(U, V, w, U, Xb, chi, 1e-3, 1e-3, Xn, Xe, False, block,
                         cache=cache if cached else None, cached=cached)
        sweep(sweep_args(data, sgd, h, h, "tanh"), out)

    keys = [(off, cached) for off in (0, 16) for cached in (False, True)]
    for k in keys:
        step(*k)                        # compile, fill the cache
    best = dict.fromkeys(keys, np.inf)
    for _ in range(rounds):
        for k in keys:
            t0 = time.perf_counter()
            step(*k)
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", type=float, default=1e6)
    ap.add_argument("--ds", default="1,4,16")
    ap.add_argument("--Bs", default="1,16")
    ap.add_argument("--E", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    N = int(args.N)
    print(f"N = {N}, tanh, E = {args.E}; M particle-steps/s, best of {args.rounds} "
          "alternated rounds")
    print(f"{'d':>3} {'B':>3} | {'on line':>8} {'off 16 B':>8} {'ratio':>6} | "
          f"{'cached on':>9} {'off 16 B':>8} {'ratio':>6}")
    for d in map(int, args.ds.split(",")):
        for B in map(int, args.Bs.split(",")):
            t = configuration(N, d, B, args.E, args.rounds)
            r = [N / t[k] / 1e6 for k in ((0, False), (16, False), (0, True), (16, True))]
            print(f"{d:>3} {B:>3} | {r[0]:>8.1f} {r[1]:>8.1f} {r[0] / r[1]:>6.3f} | "
                  f"{r[2]:>9.1f} {r[3]:>8.1f} {r[2] / r[3]:>6.3f}", flush=True)


if __name__ == "__main__":
    main()
