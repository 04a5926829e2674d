"""Time the exact classifier on random abc-parametrizations.

    python benchmarks/bench_classify.py [--count 10000] [--max-L 20]

Prints the per-item time of construction + classify(), and of classify()
alone, for parametrizations with L drawn uniformly from 1..max_L and
exponents on a grid of quarters (a third of them on the stable slice).
"""
import argparse
import random
import time
from fractions import Fraction

import tp_limits as tp


def random_abc(rng: random.Random, max_L: int) -> tuple:
    L = rng.randint(1, max_L)
    q = lambda: Fraction(rng.randint(-8, 8), 4)  # noqa: E731
    a = [q() for _ in range(L + 1)]
    b = [q() for _ in range(L + 1)]
    if rng.random() < 1 / 3:
        b = [-a[0]] + [Fraction(1, 2) - x for x in a[1:L]] + [b[L]]
    c = q() if rng.random() < 0.5 else [q() for _ in range(L + 1)]
    return a, b, c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--max-L", type=int, default=20)
    args = ap.parse_args()
    rng = random.Random(0)
    specs = [random_abc(rng, args.max_L) for _ in range(args.count)]
    t0 = time.perf_counter()
    params = [tp.ABC(a, b, c) for a, b, c in specs]
    t1 = time.perf_counter()
    regimes = [p.classify().regime for p in params]
    t2 = time.perf_counter()
    counts = {r: regimes.count(r) for r in sorted(set(regimes))}
    print(f"{args.count} random parametrizations, L in 1..{args.max_L}")
    print(f"  construct ABC : {(t1 - t0) / args.count * 1e3:.3f} ms per item")
    print(f"  classify()    : {(t2 - t1) / args.count * 1e3:.3f} ms per item")
    print(f"  total         : {(t2 - t0):.1f} s;  regimes: {counts}")


if __name__ == "__main__":
    main()
