"""Throughput of the one-hidden-layer limit kernel, with its two yardsticks.

    python benchmarks/bench_limit.py [--Ns 1e5,1e6,1e7] [--ds 1,4,16] [--Bs 1,16] [--E 4]
                                     [--baseline OLD_TREE] [--rounds 3]

All in one run on this machine (tanh, d_out = 1, evaluation on E inputs every
step, float64):

* numba   : particle-steps per second of the fused kernel (one sweep/step);
* numpy   : the same step by the plain vectorized NumPy twin (reference.py);
* bw bound: a STREAM-style in-place read-modify-write (Numba prange, the
            particle-update access pattern) gives bytes/s; one step must read
            and write (d + d_out) float64 per particle, so the bound is
            bandwidth / (16 (d + d_out)) particle-steps per second;
* phi floor: the time of the (B + B + E) nonlinearity evaluations a particle
            needs per step, measured with the same vectorized tanh;
* compute floor: that time plus the step's multiply-adds at the machine's
            dgemm rate (BLAS on 2 threads, measured here):
            (2B + E)·d pre-activations, B·d for the Z^U update and
            (3B + E)·d_out for χᵀZ^{nV}, the Z^{nV} update and the readouts.
            No kernel that does this arithmetic can beat it; the bandwidth
            bound and the compute floor together are the roofline.

The three yardsticks (bandwidth, tanh, dgemm) are measured before and after
the kernels and each takes the better value: a busy moment on a shared machine
can double the tanh time, which made fractions above 100 % in one run.

With ``--baseline DIR`` (a checkout of an older version, e.g. from ``git
worktree add DIR REV``) the kernel columns alone are timed ``--rounds`` times on
that version's package and on this one, each round in one process per version,
alternating, and the best rates of each and their ratio are printed per
configuration, without and with the cache: on a shared machine only a
comparison within one run means something.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from numba import njit, prange

from tp_limits.elementwise import fast_tanh
from tp_limits.engine.aligned import as_aligned, zeros_aligned
from tp_limits.limit.fused.blocks import block_size
from tp_limits.limit.fused.columns import n_columns
from tp_limits.limit.fused.contract import SweepData, sweep_args
from tp_limits.limit.fused.phi import cache_planes
from tp_limits.limit.fused.sweep import sweep
from tp_limits.limit.fused.sweep_numpy import sweep_numpy
from tp_limits.spec.optimizers import SGD


@njit(parallel=True, fastmath=True, error_model="numpy", cache=True)
def _rmw(a, s, t):
    for i in prange(a.shape[0]):
        a[i] = a[i] * s + t


@njit(parallel=True, fastmath=True, error_model="numpy", cache=True)
def _tanh_sum(x, reps):
    tot = 0.0
    for r in range(reps):
        for i in prange(x.shape[0]):
            tot += fast_tanh(x[i] + r * 1e-9)
    return tot


def timed(fn, min_time=0.5, min_reps=2):
    """Best time of repeated calls (after one warm-up call) over at least ``min_time``.

    The minimum, not the mean: on a shared machine other load only ever adds
    time, so the fastest repeat is the best estimate of what the code costs.
    Every column (kernel, NumPy twin, tanh, dgemm) is timed this way.
    """
    fn()
    reps, best, t0 = 0, np.inf, time.perf_counter()
    while reps < min_reps or time.perf_counter() - t0 < min_time:
        t1 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t1)
        reps += 1
    return best


def bandwidth(nbytes: int, reps: int = 8) -> float:
    """Best of ``reps`` in-place sweeps: a bound should be the most the machine gave."""
    a = np.ones(nbytes // 8)
    _rmw(a, 1.0000001, 1e-9)
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        _rmw(a, 1.0000001, 1e-9)
        best = min(best, time.perf_counter() - t0)
    return 2 * a.nbytes / best


def fma_per_s() -> float:
    """Multiply-adds per second of a large float64 gemm (the practical compute peak)."""
    a = np.random.default_rng(1).standard_normal((2000, 2000))
    return 2000 ** 3 / timed(lambda: a @ a)


def fmas(d: int, B: int, E: int, d_out: int = 1, cached: bool = False) -> int:
    """Multiply-adds per particle and step; with the φ cache the update's B·d
    pre-activation products are not redone."""
    return (B + E + (0 if cached else B)) * d + B * d + (3 * B + E) * d_out


def roofline(bw, ns, peak, d, B, E, cached=False, planes=None):
    """(bandwidth bound, compute floor) in particle-steps/s.  The cache adds
    2·planes·B float64 of traffic per particle (φ, and φ′ where it does not follow
    from φ: ``cache_planes``, written by one sweep, read by the next) and removes B
    φ evaluations."""
    planes = cache_planes("tanh") if planes is None else planes
    bound = bw / (16 * (d + 1) + (16 * planes * B if cached else 0))
    n_phi = B + E + (0 if cached else B)
    compute = 1.0 / (n_phi * ns * 1e-9 + fmas(d, B, E, cached=cached) / peak)
    return bound, compute


def phi_ns() -> float:
    x = np.random.default_rng(0).standard_normal(4_000_000)
    return timed(lambda: _tanh_sum(x, 4)) / (4 * x.size) * 1e9


def problem(N, d, B, E):
    """The benchmarks' sweep: particles on cache lines, as the engine places them
    (engine/aligned.py), a batch, the next batch and the eval inputs, the output rows
    and a φ cache: (U, V, w, Xb, Xn, Xe, chi, block, out, cache)."""
    rng = np.random.default_rng(0)
    U = as_aligned(rng.standard_normal((d, N)) / np.sqrt(d))
    V = as_aligned(rng.standard_normal((1, N)))
    w = np.full(1, 1.0 / N)
    Xb, Xn, Xe = (rng.standard_normal((k, d)) for k in (B, B, E))
    chi = 1e-6 * rng.standard_normal((B, 1))
    block = block_size(d, 1, B, E, N)
    out = np.zeros(((N + block - 1) // block, n_columns(B, E, 1, False)))
    cache = zeros_aligned((cache_planes("tanh"), B, N))
    return U, V, w, Xb, Xn, Xe, chi, block, out, cache


def run(N, d, B, E, numpy_too):
    U, V, w, Xb, Xn, Xe, chi, block, out, cache = problem(N, d, B, E)
    sgd = SGD()
    h = sgd.coordinate(0.1, 1.0, 0.0, 1)[1]

    def args(c=None, cached=False):
        return sweep_args(SweepData(U, V, w, U, Xb, chi, 0.1, 0.1, Xn, Xe, False, block,
                                    cache=c, cached=cached), sgd, h, h, "tanh")

    def numba_step(c, cached):
        out[:] = 0.0
        sweep(args(c, cached), out)

    t_nb = timed(lambda: numba_step(None, False))
    numba_step(cache, False)               # fill it (Xn's values stand in for Xb's)
    t_cache = timed(lambda: numba_step(cache, True))
    cache = None                           # free it before the NumPy twin runs
    t_np = (timed(lambda: sweep_numpy(args()), min_reps=3, min_time=1.0)
            if numpy_too else float("nan"))
    return N / t_nb, N / t_cache, N / t_np


def yardsticks():
    """(read-modify-write bandwidth in B/s, ns per tanh, multiply-adds per s)."""
    return bandwidth(800_000_000), phi_ns(), fma_per_s()


CHILD = r"""
import json, os, sys
if os.environ.get("TP_TREE"):
    sys.path.insert(0, os.environ["TP_TREE"])
sys.path.insert(0, os.environ["TP_BENCH"])
import tp_limits
from bench_limit import run
configs, E = json.loads(sys.argv[1]), int(sys.argv[2])
rates = [list(run(N, d, B, E, False)[:2]) for N, d, B in configs]
print(json.dumps({"package": os.path.dirname(tp_limits.__file__), "rates": rates}))
"""


def compare(args, configs):
    """Best kernel rates (without, with the cache) of the baseline tree and of this one,
    each round one process per tree, alternating."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    best = {}
    for r in range(args.rounds):
        for name, tree in (("baseline", args.baseline), ("this", here)):
            env = dict(os.environ, TP_TREE=tree, TP_BENCH=os.path.dirname(__file__))
            res = subprocess.run([sys.executable, "-c", CHILD, json.dumps(configs),
                                  str(args.E)], capture_output=True, text=True, check=True,
                                 env=env)
            got = json.loads(res.stdout.strip().splitlines()[-1])
            if r == 0:
                print(f"{name}: package {got['package']}", flush=True)
            for c, rates in zip(map(tuple, configs), got["rates"]):
                old = best.get((name, c), (0.0, 0.0))
                best[name, c] = tuple(max(a, b) for a, b in zip(old, rates))
        print(f"round {r + 1} of {args.rounds} done", flush=True)
    print(f"{'N':>9} {'d':>3} {'B':>3} {'baseline':>9} {'this':>8} {'ratio':>6} | "
          f"{'cached: baseline':>16} {'this':>8} {'ratio':>6}   (M particle-steps/s)")
    for c in map(tuple, configs):
        (o, oc), (n, nc) = best["baseline", c], best["this", c]
        print(f"{c[0]:>9} {c[1]:>3} {c[2]:>3} {o / 1e6:>9.1f} {n / 1e6:>8.1f} {n / o:>5.2f}x | "
              f"{oc / 1e6:>16.1f} {nc / 1e6:>8.1f} {nc / oc:>5.2f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--Ns", default="1e5,1e6,1e7")
    ap.add_argument("--ds", default="1,4,16")
    ap.add_argument("--Bs", default="1,16")
    ap.add_argument("--E", type=int, default=4)
    ap.add_argument("--numpy-max", type=float, default=1e7, help="skip NumPy above this N")
    ap.add_argument("--baseline", default="", help="source tree of an older version to time "
                    "against this one (kernel columns only)")
    ap.add_argument("--rounds", type=int, default=3, help="alternations with --baseline")
    args = ap.parse_args()
    if args.baseline:
        compare(args, [[int(float(N)), int(d), int(B)] for N in args.Ns.split(",")
                       for d in args.ds.split(",") for B in args.Bs.split(",")])
        return
    # The yardsticks are measured before and after the kernels, and each takes the
    # better of the two: other load on a shared machine only makes them look worse,
    # and a yardstick that looks worse than the hardware inflates every fraction.
    first = yardsticks()
    rows = []
    for N in (int(float(x)) for x in args.Ns.split(",")):
        for d in map(int, args.ds.split(",")):
            for B in map(int, args.Bs.split(",")):
                rows.append((N, d, B, *run(N, d, B, args.E, N <= args.numpy_max)))
                print(f"measured N={N} d={d} B={B}: {rows[-1][3] / 1e6:.1f} M/s, cached "
                      f"{rows[-1][4] / 1e6:.1f} M/s", flush=True)
    last = yardsticks()
    bw, ns, peak = max(first[0], last[0]), min(first[1], last[1]), max(first[2], last[2])
    for name, (b, t, p) in (("before", first), ("after", last), ("used", (bw, ns, peak))):
        print(f"{name:>6}: in-place read-modify-write bandwidth {b / 1e9:.1f} GB/s; "
              f"vectorized tanh {t:.2f} ns per evaluation; dgemm {p / 1e9:.1f} G "
              "multiply-adds/s (2 threads)")
    print(f"{'N':>9} {'d':>3} {'B':>3} {'numba Mp/s':>11} {'numpy Mp/s':>11} {'speed-up':>8} "
          f"{'bw bound':>9} {'of bw':>6} {'phi floor':>10} {'of floor':>8} "
          f"{'compute':>8} {'of roof':>7} | {'cached Mp/s':>11} {'bw bound':>9} "
          f"{'compute':>8} {'of roof':>7}")
    for N, d, B, nb, nbc, npy in rows:
        bound, compute = roofline(bw, ns, peak, d, B, args.E)
        floor = 1e9 / ((2 * B + args.E) * ns)
        roof = min(bound, compute)
        cb, cc = roofline(bw, ns, peak, d, B, args.E, cached=True)
        print(f"{N:>9} {d:>3} {B:>3} {nb / 1e6:>11.1f} {npy / 1e6:>11.2f} "
              f"{nb / npy:>8.1f} {bound / 1e6:>9.0f} {nb / bound:>6.1%} "
              f"{floor / 1e6:>10.0f} {nb / floor:>8.1%} "
              f"{compute / 1e6:>8.0f} {nb / roof:>7.1%} | {nbc / 1e6:>11.1f} "
              f"{cb / 1e6:>9.0f} {cc / 1e6:>8.0f} {nbc / min(cb, cc):>7.1%}")


if __name__ == "__main__":
    main()
