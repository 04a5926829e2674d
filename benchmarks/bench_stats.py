"""What a finite run spends outside its SGD steps: drawing W_0 and recording statistics.

    python benchmarks/bench_stats.py [--widths 1024,2048,4096,8192]

For each width n, measured in the same run (ms, median of --reps):

* draw     : the n x n initial Gaussian, NumPy's Generator.standard_normal
             against the compiled draw of engine/normals.py (the same numbers);
* frob     : ‖W_t - W_0‖_F, forming the difference in 4M-entry blocks and
             squaring it (the earlier code) against finite.stats.frobenius_distance
             (a cache-sized float64 buffer, squared in place);
* spec0    : ‖W_0‖_*, 60 sweeps of 8-vector block power iteration (the earlier
             code) against finite.stats.lanczos_norm; with the relative error of
             each against numpy.linalg.norm(W_0, 2) up to n = 2048;
* step     : one forward + backward + update at batch 1, and the same step
             followed by the evaluation forward pass and the recorder for
             record=("stats",) and record=("stats", "spectral"), as ratios to it.

Each statistic is interleaved with the backend's products, as in a run, so a
BLAS pool that would fight with the products shows up in its time.
"""
import argparse
import time

import numpy as np

import tp_limits as tp
from tp_limits.engine.backend import get_backend
from tp_limits.engine.normals import standard_normal
from tp_limits.finite.network import FiniteNetwork
from tp_limits.finite.stats import (
    StatsRecorder,
    frobenius_distance,
    lanczos_norm,
    spectral_norm,
)


def median_ms(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def old_frobenius(W, W0):
    """The earlier ‖W - W_0‖_F: 4M-entry blocks, difference and square as temporaries."""
    step = max(1, (1 << 22) // W.shape[1])
    tot = 0.0
    for i in range(0, W.shape[0], step):
        d = W[i:i + step] - W0[i:i + step]
        tot += float(np.sum(d * d))
    return float(np.sqrt(tot))


def bench(n, reps):
    b = get_backend("numpy")
    mm = b.matmul
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4, n))
    row = {"n": n}
    row["draw_numpy"] = median_ms(lambda: np.random.default_rng(1).standard_normal((n, n)), reps)
    row["draw_compiled"] = median_ms(lambda: standard_normal(np.random.default_rng(1), (n, n)),
                                     reps)
    W0 = standard_normal(rng, (n, n)) / np.sqrt(n)
    W = W0 + 1e-3 * standard_normal(rng, (n, n)) / np.sqrt(n)

    def with_product(fn):
        def run():
            mm(X, W.T)
            return fn()
        return run
    row["frob_old"] = median_ms(with_product(lambda: old_frobenius(W, W0)), reps)
    row["frob_new"] = median_ms(with_product(lambda: frobenius_distance(W, W0, b)), reps)
    power = lambda: spectral_norm(lambda V: mm(W0, V), lambda U: mm(W0.T, U), W0.shape, b,  # noqa: E731
                                  np.float64, iters=60)[0]
    lanczos = lambda: lanczos_norm(lambda v: mm(W0, v[:, None])[:, 0],  # noqa: E731
                                   lambda u: mm(W0.T, u[:, None])[:, 0], W0.shape, b, np.float64)
    row["spec0_power"] = median_ms(power, max(1, reps // 2))
    row["spec0_lanczos"] = median_ms(lanczos, max(1, reps // 2))
    exact = np.linalg.norm(W0, 2) if n <= 2048 else np.nan
    row["err_power"] = (power() - exact) / exact
    row["err_lanczos"] = (lanczos() - exact) / exact
    W = W0 = None                                  # free them before the network

    net = tp.MLP(tp.mup(2), d_in=2, d_out=1, phi="tanh")
    nw = FiniteNetwork(net, n, 0.1, 0, b, np.float64, keep_init=True)
    Xb, Xe = rng.standard_normal((1, 2)), rng.standard_normal((4, 2))
    chi = np.full((1, 1), 1e-3)

    def step():
        hs, xs, f = nw.forward(Xb, 0)
        nw.step(hs, xs, chi)
    row["step"] = median_ms(step, reps)
    for name, rec in [("stats", StatsRecorder(nw, reps + 2, 4, spectral=False)),
                      ("spectral", StatsRecorder(nw, reps + 2, 4, spectral=True))]:
        rec.record(0, *nw.forward(Xe, 0))
        t = iter(range(1, reps + 2))

        def recorded():
            step()
            rec.record(next(t), *nw.forward(Xe, 0))
        row[name] = median_ms(recorded, reps) / row["step"]
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="1024,2048,4096,8192")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    print("| n | draw NumPy / compiled (ms) | ‖ΔW‖_F old / new (ms) | ‖W_0‖_* power / Lanczos "
          "(ms) | rel. error power / Lanczos | step (ms) | with stats | with stats + spectral |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (int(w) for w in args.widths.split(",")):
        r = bench(n, args.reps)
        print(f"| {n} | {r['draw_numpy']:.0f} / {r['draw_compiled']:.0f} "
              f"({r['draw_numpy'] / r['draw_compiled']:.1f}x) | {r['frob_old']:.1f} / "
              f"{r['frob_new']:.1f} ({r['frob_old'] / r['frob_new']:.1f}x) | "
              f"{r['spec0_power']:.0f} / {r['spec0_lanczos']:.0f} "
              f"({r['spec0_power'] / r['spec0_lanczos']:.1f}x) | "
              f"{r['err_power']:.1e} / {r['err_lanczos']:.1e} | {r['step']:.1f} | "
              f"{r['stats']:.2f}x | {r['spectral']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
