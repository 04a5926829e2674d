"""The limit engines on a GPU (CuPy), beside their rooflines on that device.

    python benchmarks/bench_gpu.py [--deep-Ns 100000,1000000] [--T 200] [--one-N 10000000]
                                   [--largest-T]

All columns from one run on one device:

* bandwidth: the best of repeated in-place read-modify-write sweeps (a = a s + t)
  over a 2 GiB float64 array, counting bytes read and written, and the best
  read-only reduction (sum) over it;
* dgemm: float64 multiply-adds per second of an 8192² product;
* deep job (μP tanh, d = 2, L = 3, B = 4, E = 8, one replicate, Stein): wall time
  against the history model of bench_deep.py (the bytes the T steps must read
  at the read bandwidth, the multiply-adds at the dgemm rate; the larger is the
  roofline time), for float64 and float32 storage;
* one hidden layer: particle-steps per second of a sweep, by the fused CUDA
  kernel (sweep_cuda.py) and by the whole-array twin on the device, against
  the roofline: the bandwidth bound (16 (d + d_out) bytes per particle and
  step at the read-modify-write bandwidth) and the compute floor (the
  2B + E evaluations of tanh at the device's measured tanh rate plus the
  step's multiply-adds at its measured scalar FMA rate, as in bench_limit.py);
* --largest-T: the largest T whose deep job at N = 10⁵ (float32) fits the memory
  guard, and the time of a run at a T of that order (capped to stay in time).
"""
import argparse
import time

import numpy as np
from bench_deep import history_model
from bench_limit import fmas

import tp_limits as tp
from tp_limits.engine.backend import get_backend
from tp_limits.engine.cuda_source import FAST_TANH
from tp_limits.engine.memory import usable_bytes
from tp_limits.limit.one_hidden.blocks import block_size
from tp_limits.limit.one_hidden.contract import SweepData, sweep_args
from tp_limits.limit.one_hidden.sweep_cuda import sweep_cuda
from tp_limits.limit.one_hidden.sweep_numpy import sweep_numpy
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


def deep_job(N, T, dtype, backend, L=3, B=4, E=8):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((T * B, 2)) / np.sqrt(2)
    Y = np.tanh(X[:, :1] - X[:, 1:])
    r = tp.Routine(X, Y, lr=0.1, batch_size=B,
                   eval_inputs=rng.standard_normal((E, 2)) / np.sqrt(2))
    net = tp.MLP(tp.mup(L), 2, 1, phi="tanh")
    t0 = time.perf_counter()
    tr = tp.simulate_limit(net, r, particles=N, record=(), dtype=np.dtype(dtype),
                           replicates=1, backend=backend)
    return time.perf_counter() - t0, tr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deep-Ns", default="100000,1000000")
    ap.add_argument("--T", type=int, default=200)
    ap.add_argument("--one-N", type=int, default=10_000_000)
    ap.add_argument("--largest-T", action="store_true")
    args = ap.parse_args()
    b = get_backend("cupy")
    import cupy as cp
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    bw_rmw, bw_read, fma = device_rates(b)
    print(f"device {dev}: read-modify-write {bw_rmw / 1e12:.2f} TB/s, read "
          f"{bw_read / 1e12:.2f} TB/s, dgemm {fma / 1e12:.2f} T multiply-adds/s", flush=True)

    print("\n| N | storage | T | wall (s) | model bytes (GB) | bandwidth time (s) | "
          "compute time (s) | fraction of roofline |\n|---|---|---|---|---|---|---|---|")
    if args.deep_Ns:
        deep_job(10_000, 4, "float64", "cupy")                 # warm-up (CuPy compiles)
        deep_job(10_000, 4, "float32", "cupy")
    for N in (int(x) for x in args.deep_Ns.split(",") if x):
        for dtype in ("float64", "float32"):
            wall, _ = deep_job(N, args.T, dtype, "cupy")
            nbytes, macs = history_model(N, 3, 4, 8, args.T, np.dtype(dtype).itemsize)
            tb, tc = nbytes / bw_read, macs / fma
            print(f"| {N:,} | {dtype} | {args.T} | {wall:.2f} | {nbytes / 1e9:.0f} | {tb:.2f} | "
                  f"{tc:.3f} | {max(tb, tc) / wall:.0%} |", flush=True)

    tanh_rate, fma_rate = compute_rates(b)
    print(f"\ndevice tanh {tanh_rate / 1e9:.0f} G/s, scalar float64 FMA "
          f"{fma_rate / 1e12:.1f} T/s")
    print("\n| N | d | B | cuda kernel (M particle-steps/s) | array twin | bandwidth bound | "
          "compute floor | fraction of roofline |\n|---|---|---|---|---|---|---|---|")
    N, E = args.one_N, 4
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
            rates = [N / best(lambda: fn(a, b), b.synchronize) for fn in (sweep_cuda, sweep_numpy)]
            bound = bw_rmw / (16 * (d + 1))
            floor = 1.0 / ((2 * B + E) / tanh_rate + fmas(d, B, E) / fma_rate)
            print(f"| {N:,} | {d} | {B} | {rates[0] / 1e6:.0f} | {rates[1] / 1e6:.0f} | "
                  f"{bound / 1e6:.0f} | {floor / 1e6:.0f} | {rates[0] / min(bound, floor):.0%} |",
                  flush=True)

    if args.largest_T:
        N = 100_000
        per_T = 4 * 2 * 4 * 4                                  # float32 histories per step
        T_fit = int(usable_bytes(b) / (N * per_T))
        print(f"\nlargest T at N = {N:,}, float32, that the history storage leaves room for: "
              f"about {T_fit:,}")
        for T in (400, 800):
            wall, _ = deep_job(N, T, "float32", "cupy")
            print(f"T = {T}: {wall:.1f} s", flush=True)


if __name__ == "__main__":
    main()
