"""The limit engines on a GPU (CuPy), beside their rooflines on that device.

    python benchmarks/bench_gpu.py [--deep-Ns 100000,1000000] [--T 200] [--one-N 10000000]
                                   [--kinds sgd,muon,residual] [--passes] [--largest-T]
                                   [--profile N:T] [--horizon T,T,...]
    python benchmarks/bench_gpu.py --host [--kinds sgd,muon,residual]

(``--host`` times the same deep jobs at N = 10⁵ with the NumPy engine, for the
speed-up column: run it on the CPU machine the speed-up is quoted against.)

All columns from one run on one device:

* bandwidth: the best of repeated in-place read-modify-write sweeps (a = a s + t)
  over a 2 GiB float64 array, counting bytes read and written, and the best
  read-only reduction (sum) over it;
* dgemm: float64 multiply-adds per second of an 8192² product;
* deep job (μP tanh, d = 2, L = 3, B = 4, E = 8, one replicate, Stein): wall time
  against the history model of bench_deep.py (the bytes the T steps must read
  at the read bandwidth, the multiply-adds at the dgemm rate; the larger is the
  roofline time), for float64 and float32 storage; with ``--kinds`` the same job
  at N = 10⁵ (float64) with μP-Muon (its k × k work on the device, the default, and
  on the host, as before 2026-11-28) and with two Depth-μP residual blocks;
* ``--passes``: each pass over a history of k = 400 rows of N = 10⁶ entries
  (passes.py's ArrayPasses) against the time its reads take at the read bandwidth;
* one hidden layer: particle-steps per second of a sweep, by the fused CUDA
  kernel (sweep_cuda.py) and by the whole-array twin on the device, against
  the roofline: the bandwidth bound (16 (d + d_out) bytes per particle and
  step at the read-modify-write bandwidth) and the compute floor (the
  2B + E evaluations of tanh at the device's measured tanh rate plus the
  step's multiply-adds at its measured scalar FMA rate, as in bench_limit.py);
* ``--profile N:T``: where a deep run's time goes (synchronized timers around the
  passes, the Gram factors, the host's m × m roots and the draws); ``--horizon``: wall
  time and device memory of the deep job at N = 10⁵ for each T, with the growth
  exponent between the two largest;
* the one-hidden-layer table has three kernels: inputs through pointers, in constant
  memory, and in constant memory with registers for two blocks per multiprocessor
  (sweep_cuda.launch_choice picks one by d and B from this table);
* --largest-T: the largest T whose deep job at N = 10⁵ fits the engine's memory
  guard (float64 and float32 storage), the times of T = 400 and 800 (float64), the
  growth exponent between them and the time it projects for the largest T.
"""
import argparse
import contextlib
import time

import numpy as np
from bench_deep import history_model
from bench_limit import fmas

import tp_limits as tp
from tp_limits.engine.backend import get_backend
from tp_limits.engine.cuda_source import FAST_TANH
from tp_limits.errors import MemoryBudgetError
from tp_limits.limit.montecarlo.passes import ArrayPasses
from tp_limits.limit.fused.blocks import block_size
from tp_limits.limit.fused.contract import SweepData, sweep_args
from tp_limits.limit.fused.sweep_cuda import launch_choice, sweep_cuda
from tp_limits.limit.fused.sweep_numpy import sweep_numpy
from tp_limits.limit.simulate import prepare_limit
from tp_limits.spec.optimizers import SGD


def best(fn, sync, reps=5):
    fn()
    sync()
    out = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        out = min(out, time.perf_counter() - t0)
    return out


def device_rates(b):
    cp = b.xp
    a = cp.ones(1 << 28)                                   # 2 GiB float64
    rmw = cp.ElementwiseKernel("float64 s, float64 t", "float64 a", "a = a * s + t", "rmw")
    t_rmw = best(lambda: rmw(1.0000001, 1e-9, a), b.synchronize)
    t_read = best(lambda: a.sum(), b.synchronize)
    g = cp.random.default_rng(0).standard_normal((8192, 8192))
    t_gemm = best(lambda: g @ g, b.synchronize, reps=3)
    return 2 * a.nbytes / t_rmw, a.nbytes / t_read, 8192 ** 3 / t_gemm


def compute_rates(b):
    """(tanh evaluations/s, scalar float64 multiply-adds/s) of the device, in registers: the
    kernel's own tanh on standard normal arguments (as bench_limit.py measures the CPU's)."""
    cp = b.xp
    x = cp.random.default_rng(0).standard_normal(1 << 24)
    th = cp.ElementwiseKernel("float64 x", "float64 y",
                              "double s = 0.0; for (int r = 0; r < 32; ++r) "
                              "s += fast_tanh(x + r * 1e-3); y = s;", "tanh32",
                              preamble=FAST_TANH)
    fm = cp.ElementwiseKernel("float64 x", "float64 y",
                              "double a = x, c = x * 0.5, e = x * 0.25, f = x * 0.125;"
                              " for (int r = 0; r < 256; ++r) { a = a * 0.999 + 1e-3; "
                              "c = c * 0.999 + 1e-3; e = e * 0.999 + 1e-3; "
                              "f = f * 0.999 + 1e-3; } y = a + c + e + f;", "fma1024")
    y = cp.empty_like(x)
    t_tanh = best(lambda: th(x, y), b.synchronize)
    t_fma = best(lambda: fm(x, y), b.synchronize)
    return 32 * x.size / t_tanh, 1024 * x.size / t_fma


def deep_problem(T, kind="sgd", L=3, B=4, E=8):
    """(net, routine) of the deep job: μP tanh, d = 2, d_out = 1, a fixed random regression;
    ``kind`` 'sgd', 'muon' (μP-Muon, its default optimizer) or 'residual' (Depth-μP blocks)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((T * B, 2)) / np.sqrt(2)
    Y = np.tanh(X[:, :1] - X[:, 1:])
    opt = "muon" if kind == "muon" else "sgd"
    r = tp.Routine(X, Y, lr=0.05 if kind == "muon" else 0.1, batch_size=B,
                   eval_inputs=rng.standard_normal((E, 2)) / np.sqrt(2),
                   optimizer=tp.Muon() if kind == "muon" else None)
    res = tp.Residual.depth_mup(opt) if kind == "residual" else None
    return tp.MLP(tp.mup(L, optimizer=opt), 2, 1, phi="tanh", residual=res), r


def deep_job(N, T, dtype, backend, kind="sgd"):
    net, r = deep_problem(T, kind)
    t0 = time.perf_counter()
    tr = tp.simulate_limit(net, r, particles=N, record=(), dtype=np.dtype(dtype),
                           replicates=1, backend=backend, progress=False, time_budget=None)
    return time.perf_counter() - t0, tr


def largest_T(N, dtype, backend):
    """The largest T the deep job's memory guard accepts at N particles (bisection)."""
    def fits(T):
        net, r = deep_problem(T)
        try:
            prepare_limit(net, r, particles=N, record=(), dtype=np.dtype(dtype),
                          replicates=1, backend=backend, time_budget=None)
        except MemoryBudgetError:
            return False
        return True
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def pass_times(b, read_bw, shapes=((400, 1_000_000), (8000, 100_000)), m=12, r=4):
    """Each pass over k stored rows of N particles (passes.py's ArrayPasses) against
    k N 8 bytes at the read bandwidth (the conditional mean with its cross products reads
    the hats twice, so its fraction is at most half)."""
    cp = b.xp
    print("\n| pass | k | N | wall (ms) | its reads at the bandwidth (ms) | fraction |\n"
          "|---|---|---|---|---|---|")
    for k, N in shapes:
        g = cp.random.default_rng(3)
        R, V, C = g.standard_normal((k, N)), g.standard_normal((m, N)), g.standard_normal((k, m))
        Z, A = g.standard_normal((m, N)), ArrayPasses(cp)
        ideal = k * N * 8 / read_bw
        for name, fn in (("rows_times R Vᵀ", lambda: A.rows_times(R, V)),
                         ("times_rows Cᵀ R", lambda: A.times_rows(C, R)),
                         ("times_rows into out", lambda: A.times_rows(C, R, out=Z)),
                         ("mean_and_cross", lambda: A.mean_and_cross(C, R, Z.copy(), r))):
            t = best(fn, b.synchronize)
            print(f"| {name} | {k} | {N:,} | {t * 1e3:.2f} | {ideal * 1e3:.2f} | "
                  f"{ideal / t:.0%} |", flush=True)


def profile(b, N, T):
    """Where a deep run's time goes: the passes, the Gram factors, the host's m × m roots,
    the draws and the rest (every timed call is synchronized, which adds a little)."""
    import tp_limits.limit.montecarlo.families as fam
    from tp_limits.limit.montecarlo.gram import GramFactor
    from tp_limits.limit.sampling import Draws
    spent = {}

    def wrap(owner, name, label):
        fn = getattr(owner, name)

        def timed(*a, **k):
            b.synchronize()
            t0 = time.perf_counter()
            out = fn(*a, **k)
            b.synchronize()
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - t0
            return out
        setattr(owner, name, timed)
        return owner, name, fn
    saved = [wrap(ArrayPasses, "rows_times", "pass: rows_times"),
             wrap(ArrayPasses, "times_rows", "pass: times_rows"),
             wrap(ArrayPasses, "mean_and_cross", "pass: mean_and_cross"),
             wrap(GramFactor, "extend", "gram: extend"),
             wrap(GramFactor, "solve", "gram: solve"),
             wrap(fam.np.linalg, "eigh", "host: m × m roots"),
             wrap(Draws, "normal", "draws")]
    try:
        wall, _ = deep_job(N, T, "float64", "cupy")
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
    print(f"\nprofile, N = {N:,}, T = {T} (float64, synchronized calls): wall {wall:.1f} s")
    for label, t in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {label:28s} {t:8.2f} s  {t / wall:6.1%}")
    print(f"  {'other':28s} {wall - sum(spent.values()):8.2f} s", flush=True)


def horizon(b, N, Ts, dtypes):
    """Wall time and device memory (the memory pool's size after the run) of the deep job
    at N particles for each T, and the growth exponent between the two largest T."""
    cp = b.xp
    print("\n| T | storage | wall (s) | device memory (GiB) |\n|---|---|---|---|")
    for dtype in dtypes:
        walls = {}
        for T in Ts:
            pool = cp.get_default_memory_pool()
            pool.free_all_blocks()
            try:
                walls[T], _ = deep_job(N, T, dtype, "cupy")
            except MemoryBudgetError as exc:
                print(f"| {T} | {dtype} | refused: {str(exc)[:80]} | |", flush=True)
                continue
            print(f"| {T:,} | {dtype} | {walls[T]:.1f} | {pool.total_bytes() / 2**30:.1f} |",
                  flush=True)
        if len(walls) >= 2:
            (t0, w0), (t1, w1) = sorted(walls.items())[-2:]
            print(f"{dtype}: growth exponent between T = {t0} and {t1}: "
                  f"{np.log(w1 / w0) / np.log(t1 / t0):.2f}", flush=True)


@contextlib.contextmanager
def muon_core_on_host():
    """Muon's k × k work on the host, as the engine ran it before it moved to the device."""
    from tp_limits.limit.montecarlo.msign import MsignDeepRun
    MsignDeepRun.core_on_device = False
    try:
        yield
    finally:
        MsignDeepRun.core_on_device = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deep-Ns", default="100000,1000000")
    ap.add_argument("--T", type=int, default=200)
    ap.add_argument("--one-N", type=int, default=10_000_000, help="0: no one-hidden table")
    ap.add_argument("--kinds", default="", help="deep jobs besides SGD at N = 10^5: muon,residual")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--passes", action="store_true")
    ap.add_argument("--largest-T", action="store_true")
    ap.add_argument("--host", action="store_true", help="the deep jobs at N = 10^5 on NumPy")
    ap.add_argument("--profile", default="", help="N:T of a deep run to break down")
    ap.add_argument("--horizon", default="", help="T values of the horizon table (N = 10^5)")
    ap.add_argument("--horizon-dtypes", default="float64,float32")
    args = ap.parse_args()
    kinds = ["sgd"] + [k for k in args.kinds.split(",") if k]
    if args.host:
        deep_job(1000, 4, "float64", "numpy")                  # warm-up (Numba compiles)
        for kind in kinds:
            print(f"host, {kind}, N = 100,000, T = {args.T}: "
                  f"{deep_job(100_000, args.T, 'float64', 'numpy', kind)[0]:.1f} s", flush=True)
        return
    b = get_backend("cupy")
    import cupy as cp
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    bw_rmw, bw_read, fma = device_rates(b)
    print(f"device {dev}: read-modify-write {bw_rmw / 1e12:.2f} TB/s, read "
          f"{bw_read / 1e12:.2f} TB/s, dgemm {fma / 1e12:.2f} T multiply-adds/s", flush=True)

    print("\n| N | storage | T | job | wall (s) | model bytes (GB) | bandwidth time (s) | "
          "compute time (s) | fraction of roofline |\n|---|---|---|---|---|---|---|---|---|")
    if args.deep_Ns:
        deep_job(10_000, 4, "float64", "cupy")                 # warm-up (CuPy compiles)
        deep_job(10_000, 4, "float32", "cupy")
    for N in (int(x) for x in args.deep_Ns.split(",") if x):
        for dtype in args.dtypes.split(","):
            wall, _ = deep_job(N, args.T, dtype, "cupy")
            nbytes, macs = history_model(N, 3, 4, 8, args.T, np.dtype(dtype).itemsize)
            tb, tc = nbytes / bw_read, macs / fma
            print(f"| {N:,} | {dtype} | {args.T} | sgd | {wall:.2f} | {nbytes / 1e9:.0f} | "
                  f"{tb:.2f} | {tc:.3f} | {max(tb, tc) / wall:.0%} |", flush=True)
    jobs = [(k, contextlib.nullcontext) for k in kinds[1:]]
    if "muon" in kinds:
        jobs.append(("muon, core on the host", muon_core_on_host))
    for name, context in jobs:
        kind = name.split(",")[0]
        with context():
            deep_job(10_000, 4, "float64", "cupy", kind)       # warm-up (the device's linalg)
            wall, _ = deep_job(100_000, args.T, "float64", "cupy", kind)
        print(f"| 100,000 | float64 | {args.T} | {name} | {wall:.2f} | | | | |", flush=True)
    if args.passes:
        pass_times(b, bw_read)
    if args.one_N:
        one_hidden_table(b, args.one_N, bw_rmw)
    if args.profile:
        N, T = (int(x) for x in args.profile.split(":"))
        profile(b, N, T)
    if args.horizon:
        horizon(b, 100_000, [int(x) for x in args.horizon.split(",")],
                args.horizon_dtypes.split(","))
    if args.largest_T:
        largest_T_report(b)


def one_hidden_table(b, N, bw_rmw):
    """The fused sweep with its inputs read through pointers (global), from constant
    memory, and from constant memory with registers for two blocks per multiprocessor,
    beside the whole-array twin, against the roofline."""
    cp = b.xp
    tanh_rate, fma_rate = compute_rates(b)
    print(f"\ndevice tanh {tanh_rate / 1e9:.0f} G/s, scalar float64 FMA "
          f"{fma_rate / 1e12:.1f} T/s")
    variants = (("global", 1), ("constant", 1), ("constant", 2))
    names = " | ".join(f"{i}, {m} block(s)" for i, m in variants)
    print(f"\n| N | d | B | {names} (M particle-steps/s) | array twin | bandwidth bound | "
          "compute floor | fraction of roofline, each | runs use |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")
    E = 4
    for d in (1, 4, 16):
        for B in (1, 16):
            g = cp.random.default_rng(1)
            U, V = g.standard_normal((d, N)) / np.sqrt(d), g.standard_normal((1, N))
            Xb, Xn, Xe = (g.standard_normal((k, d)) for k in (B, B, E))
            chi = g.standard_normal((B, 1))
            w = np.full(1, 1.0 / N)
            blk = block_size(d, 1, B, E, N, False)
            h = SGD().coordinate(0.1, 1.0, 0.0, 1)[1]
            a = sweep_args(SweepData(U, V, w, U, Xb, chi, 0.1, 0.1, Xn, Xe, False, blk), SGD(),
                           h, h, "tanh", cp)
            fns = [lambda i=i, m=m: sweep_cuda(a, b, i, m) for i, m in variants]
            rates = [N / best(fn, b.synchronize) for fn in fns]
            twin = N / best(lambda: sweep_numpy(a, b), b.synchronize)
            bound = bw_rmw / (16 * (d + 1))
            floor = 1.0 / ((2 * B + E) / tanh_rate + fmas(d, B, E) / fma_rate)
            roof = min(bound, floor)
            print(f"| {N:,} | {d} | {B} | "
                  + " | ".join(f"{r / 1e6:.0f}" for r in rates)
                  + f" | {twin / 1e6:.0f} | {bound / 1e6:.0f} | {floor / 1e6:.0f} | "
                  + ", ".join(f"{r / roof:.0%}" for r in rates)
                  + " | {}, {} |".format(*launch_choice(d, B)), flush=True)


def largest_T_report(b, N=100_000):
    """The largest T of the deep job the memory guard accepts, and its projected time."""
    for dtype in ("float64", "float32"):
        print(f"\nlargest T at N = {N:,}, {dtype}, that the memory guard accepts: "
              f"{largest_T(N, dtype, 'cupy'):,}", flush=True)
    fit = largest_T(N, "float64", "cupy")
    walls = {T: deep_job(N, T, "float64", "cupy")[0] for T in (400, 800)}
    p = np.log(walls[800] / walls[400]) / np.log(2)
    print(f"float64: T = 400 {walls[400]:.1f} s, T = 800 {walls[800]:.1f} s (growth "
          f"exponent {p:.2f}); T = {fit:,} projects to {walls[800] * (fit / 800) ** p:.0f} s",
          flush=True)


if __name__ == "__main__":
    main()
