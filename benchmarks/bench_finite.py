"""Time one SGD step of the finite engine against the matrix products it needs.

    python benchmarks/bench_finite.py [--widths 256,1024,4096,16384] [--backend numpy]

For each (L, B, width) it reports, measured in the same run:

* step    : FiniteNetwork.forward + FiniteNetwork.step (tanh, muP), ms;
* blas    : only the products a step must do — per n x n layer one forward
            product (B x n)(n x n), one backward product, and one in-place
            rank-B update, plus the thin input/readout products — ms;
* ratio   : step / blas (1.0 = no overhead beyond the BLAS calls);
* naive   : the same step with the update written as W -= lr * (G.T @ X)
            (an n x n temporary), as a ratio to blas.
"""
import argparse
import time

import numpy as np

import tp_limits as tp
from tp_limits.engine.backend import get_backend
from tp_limits.finite.network import FiniteNetwork


def timeit(fn, sync, min_time=0.3, min_reps=3):
    fn()                                           # warm-up
    sync()
    reps, t0 = 0, time.perf_counter()
    while reps < min_reps or time.perf_counter() - t0 < min_time:
        fn()
        reps += 1
    sync()
    return (time.perf_counter() - t0) / reps


def bench(L, B, n, backend):
    b = get_backend(backend)
    net = tp.MLP(tp.mup(L), d_in=16, d_out=4, phi="tanh")
    nw = FiniteNetwork(net, n, 1e-3, 0, b, np.float64)
    rng = np.random.default_rng(0)
    X = b.asarray(rng.standard_normal((B, 16)), np.float64)
    chi = b.asarray(rng.standard_normal((B, 4)) * 1e-3, np.float64)

    def step():
        hs, xs, f = nw.forward(X, 0)
        nw.step(hs, xs, chi)

    t_step = timeit(step, b.synchronize)

    Gn = b.asarray(rng.standard_normal((B, n)), np.float64)
    mm, outer = b.matmul, b.add_outer

    def products():
        mm(X, nw.W[0].T)
        for l in range(1, L):
            mm(Gn, nw.W[l].T)                      # forward
            mm(Gn, nw.W[l])                        # backward
            outer(nw.W[l], -1e-9, Gn, Gn)          # in-place update
        mm(Gn, nw.W[L].T)
        outer(nw.W[0], -1e-9, Gn, X)
        outer(nw.W[L], -1e-9, chi, Gn)

    t_blas = timeit(products, b.synchronize)

    naive = FiniteNetwork(net, n, 1e-3, 0, b, np.float64)

    def naive_update(l, G, Xl):
        naive.W[l] -= naive.const.lr[l] * (G.T @ Xl)

    naive._update = naive_update

    def naive_step():
        hs, xs, f = naive.forward(X, 0)
        naive.step(hs, xs, chi)

    t_naive = timeit(naive_step, b.synchronize)
    return t_step, t_blas, t_naive


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="256,1024,4096,16384")
    ap.add_argument("--Ls", default="1,3")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--backend", default="numpy")
    args = ap.parse_args()
    print(f"{'L':>2} {'B':>3} {'width':>6} {'step ms':>9} {'blas ms':>9} {'ratio':>6} {'naive':>6}")
    for L in map(int, args.Ls.split(",")):
        for B in map(int, args.batches.split(",")):
            for n in map(int, args.widths.split(",")):
                s, bl, nv = bench(L, B, n, args.backend)
                print(f"{L:>2} {B:>3} {n:>6} {s * 1e3:>9.3f} {bl * 1e3:>9.3f} "
                      f"{s / bl:>6.2f} {nv / bl:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
