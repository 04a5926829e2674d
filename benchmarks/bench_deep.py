"""Wall time and peak memory of the deep Monte Carlo limit, and its growth in T.

    python benchmarks/bench_deep.py [--N 100000] [--L 3] [--B 4] [--E 8] [--Ts 25,50,100,200]
                                    [--zdot stein|tangent|stein,tangent] [--dtype float32]
                                    [--replicates 1] [--backend numpy|cupy]
                                    [--baseline OLD_TREE] [--rounds 2]

μP, tanh, d = 2, d_out = 1, a random regression routine (fixed seed).  Each
T runs in its own process so the peak resident memory is that run's.  The
growth exponent of wall time in T is fitted over the two largest T (the
O(N L B T² (B + E)) history passes dominate there).  For comparison the same
routine is trained once at width 8192 and its RMS distance to the limit is
reported.  With ``--baseline DIR`` (a checkout of an older version, e.g. from
``git worktree add DIR REV``) each T runs ``--rounds`` times on that version's
package and on this one, alternating, and the best times of each and their
ratio are printed: on a shared machine only a comparison within one run
means something.  With ``--zdot stein,tangent`` both Ż estimators run on the same
routines (use small N, B, E and T for the tangent one: its memory grows like
N·L·(B·T)²) and the ratio of their times is printed per T.

Roofline (Stein, host backend): :func:`history_model` counts the bytes the T
steps must read from the hat histories and the multiply-adds they must do;
this machine's read bandwidth (the best of repeated 2-thread sums over a 1
GiB array) and dgemm rate (2 threads) turn them into a bandwidth time and a
compute time, and the report gives max(the two) / wall: the fraction of the
roofline the engine reached, per T.
"""
import argparse
import json
import subprocess
import sys

import numpy as np

CHILD = r"""
import json, os, resource, sys, time
import numpy as np
if os.environ.get("TP_TREE"):
    sys.path.insert(0, os.environ["TP_TREE"])
import tp_limits as tp
N, L, B, E, T = (int(x) for x in sys.argv[1:6])
zdot, dtype, reps, backend = sys.argv[6].split(":")
rng = np.random.default_rng(0)
X = rng.standard_normal((T * B, 2)) / np.sqrt(2)
Y = np.tanh(X[:, :1] - X[:, 1:])
r = tp.Routine(X, Y, lr=0.1, batch_size=B, eval_inputs=rng.standard_normal((E, 2)) / np.sqrt(2))
net = tp.MLP(tp.mup(L), 2, 1, phi="tanh")
t0 = time.perf_counter()
on = {} if backend == "numpy" else {"backend": backend}
tr = tp.simulate_limit(net, r, particles=N, record=(), zdot=zdot, dtype=np.dtype(dtype),
                      replicates=int(reps), **on)
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
out = {"T": T, "wall": wall, "peak_gib": peak}
if len(sys.argv) > 7:
    t0 = time.perf_counter()
    fin = tp.train_finite(net, r, int(sys.argv[7]), seed=0, record=())
    out["finite_wall"] = time.perf_counter() - t0
    out["finite_rms_vs_limit"] = float(np.sqrt(np.mean((fin.f_eval - tr.f_eval) ** 2)))
    out["limit_se_rms"] = float(np.sqrt(np.mean(tr.f_eval_se ** 2)))
print(json.dumps(out))
"""


def history_model(N: int, L: int, B: int, E: int, T: int, itemsize: int):
    """(bytes, multiply-adds) the T steps must at least spend on the hat histories.

    Per hidden layer and step t (k = B t rows stored per family before it), the
    forward pass needs each of the four arrays (vec and hat of F^l and G^l) once,
    with the training and evaluation rows (B + E) in the same read, and so
    does the backward pass (F^l then holds k + B rows): 8k + 2B rows of N
    entries.  Every read row meets every query row once (4(B + E) + 4B per
    stored row), and the cross products of the B rows each store keeps add B
    per hat read, forward and backward: k N (10B + 4E) multiply-adds per layer.
    """
    k = B * np.arange(T, dtype=float)
    rows = (L - 1) * (8 * k + 2 * B)
    return float(np.sum(rows) * N * itemsize), float((L - 1) * np.sum(k) * N * (10 * B + 4 * E))


def rates():
    """(read bytes/s, multiply-adds/s) of this machine, best of repeated runs."""
    from bench_limit import fma_per_s, timed
    from numba import njit, prange

    @njit(parallel=True, fastmath=True, cache=False)
    def _sum(a):
        s = 0.0
        for i in prange(a.shape[0]):
            s += a[i]
        return s
    a = np.ones(1 << 27)
    return a.nbytes / timed(lambda: _sum(a), min_time=1.0), fma_per_s()


def rates_in_child():
    """rates() in a process of its own: its 1 GiB array would otherwise count in every
    run's peak memory (a child's ru_maxrss starts from the parent's size at the fork)."""
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    code = "import json, bench_deep; print(json.dumps(bench_deep.rates()))"
    out = subprocess.run([sys.executable, "-c", code], cwd=here, capture_output=True,
                         text=True, check=True).stdout
    return tuple(json.loads(out.strip().splitlines()[-1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", type=int, default=100_000)
    ap.add_argument("--L", type=int, default=3)
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--E", type=int, default=8)
    ap.add_argument("--Ts", default="25,50,100,200")
    ap.add_argument("--finite-width", type=int, default=8192, help="0: no finite comparison")
    ap.add_argument("--zdot", default="stein", help="stein, tangent, or stein,tangent")
    ap.add_argument("--dtype", default="float64", help="history storage: float64 or float32")
    ap.add_argument("--replicates", type=int, default=1)
    ap.add_argument("--backend", default="numpy", help="numpy or cupy")
    ap.add_argument("--baseline", default="", help="source tree of an older version to time "
                    "against, alternating with this one")
    ap.add_argument("--rounds", type=int, default=2, help="alternations with --baseline")
    args = ap.parse_args()
    Ts = [int(t) for t in args.Ts.split(",")]
    if args.baseline:
        return compare(args, Ts)
    bw, fma = rates_in_child()
    print(f"read bandwidth {bw / 1e9:.1f} GB/s, dgemm {fma / 1e9:.1f} G multiply-adds/s")
    itemsize = np.dtype(args.dtype).itemsize
    walls = {}
    for zdot in args.zdot.split(","):
        rows = []
        for T in Ts:
            extra = [str(args.finite_width)] if T == Ts[-1] and args.finite_width else []
            rows.append(child(args, T, zdot, extra=extra))
            r = rows[-1]
            nbytes, macs = history_model(args.N, args.L, args.B, args.E, T, itemsize)
            tb, tc = nbytes / bw, macs / fma
            print(f"zdot = {zdot:7s} T = {T:4d}: wall {r['wall']:7.2f} s, "
                  f"peak memory {r['peak_gib']:.2f} GiB; model {nbytes / 1e9:.0f} GB "
                  f"({tb:.1f} s), {macs / 1e9:.0f} G multiply-adds ({tc:.1f} s): "
                  f"{max(tb, tc) / r['wall']:.0%} of the roofline", flush=True)
        walls[zdot] = [r["wall"] for r in rows]
        if len(Ts) > 1:
            slope = np.polyfit(np.log(Ts[-2:]), np.log(walls[zdot][-2:]), 1)[0]
            print(f"zdot = {zdot}: growth exponent of wall time in T (T = {Ts[-2]}..{Ts[-1]}): "
                  f"{slope:.2f}")
        last = rows[-1]
        if "finite_wall" in last:
            print(f"finite width {args.finite_width}, same routine: {last['finite_wall']:.1f} s; "
                  f"RMS |f_n - f_limit| = {last['finite_rms_vs_limit']:.4f} "
                  f"(limit's own standard error {last['limit_se_rms']:.4f})")
    if len(walls) == 2:
        a, b = walls.values()
        print("time ratio tangent / stein per T:",
              ", ".join(f"T={T}: {y / x:.2f}" for T, x, y in zip(Ts, a, b)))

def child(args, T, zdot, tree="", extra=()):
    """One run in its own process (TP_TREE: the source tree whose package it imports)."""
    import os
    env = dict(os.environ, TP_TREE=tree)
    res = subprocess.run([sys.executable, "-c", CHILD, str(args.N), str(args.L), str(args.B),
                          str(args.E), str(T),
                          f"{zdot}:{args.dtype}:{args.replicates}:{args.backend}", *extra],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(res.stdout.strip().splitlines()[-1])


def compare(args, Ts):
    """Best wall times of the baseline tree and of this one, alternating, per T."""
    import os
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    zdot = args.zdot.split(",")[0]
    print(f"{args.dtype}, zdot = {zdot}, N = {args.N}, L = {args.L}, B = {args.B}, "
          f"E = {args.E}; baseline {args.baseline}, {args.rounds} alternations")
    for T in Ts:
        old, new = [], []
        for _ in range(args.rounds):
            old.append(child(args, T, zdot, args.baseline)["wall"])
            new.append(child(args, T, zdot, here)["wall"])
            print(f"  T = {T}: baseline {old[-1]:.1f} s, this version {new[-1]:.1f} s",
                  flush=True)
        print(f"T = {T}: best baseline {min(old):.1f} s, best this version {min(new):.1f} s: "
              f"{min(old) / min(new):.2f}x", flush=True)


if __name__ == "__main__":
    main()
