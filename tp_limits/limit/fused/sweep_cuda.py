"""The fused particle sweep as a CUDA kernel, for the one-hidden-layer limit on a GPU
(docs/theory.md §2; the optimizer's rule of §10 for its state).

One launch = one sweep = one step: each CUDA thread block owns one particle
block of the batch-means error (``block`` particles, as on the CPU); each
thread takes every 256th particle of it, reads its Z^U, Z^{nV} (and optimizer
state) once, updates them in registers with the batch (Xb, χ), writes them
back, and adds the particle's weighted columns (columns.py) to its own
sums; the block then reduces the 256 partial sums in a fixed order and
writes its row of ``out``.  No atomics: the result does not depend on
scheduling.  (Four particles per thread unrolled, with a reduction per 1024
particles, was no faster: the unrolled registers spill.)  Arithmetic is float64
whatever the storage
dtype, and the moved particles and state are read back as stored (rounded).

The source is generated (:func:`cuda_source`): φ's device function from its
registry entry's kernel form and the optimizer's from its rule's scalar step
(engine/cuda_source.py translates both), the state's loads and stores from the
rule's slots.  The sizes (d, d_out, batch rows, next and eval rows), the
statistics flag, the rule and φ are compile-time constants, so the per-particle
arrays live in registers; a kernel is compiled once per such configuration
(NVRTC, cached on disk by CuPy).  Inputs wider than ``MAX_D`` would spill those
registers: the whole-array twin (sweep_numpy.py) is used there.  The tests check
this kernel against that twin on the same device, and, without a device, that
the generated source compiles.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...engine.cuda_source import FAST_TANH, device_function
from ...nonlinearities import NONLINEARITIES
from ...spec.optimizers.base import rule_of_code
from .columns import n_columns

THREADS = 256
MAX_D = 64           # beyond this the per-particle arrays no longer fit in registers
#: the constant memory the step's inputs may take (of the device's 64 KiB)
MAX_CONSTANT_BYTES = 32 * 1024
_ENTRIES = tuple(NONLINEARITIES.values())

#: the kernel, after the generated φ (phi_dphi), T (the storage type) and, for a rule
#: with state, rule_step; UPDATE_U / UPDATE_V: the rule's generated statements
_SOURCE = r"""
#if MINB > 1
#define BOUNDS __launch_bounds__(NTH, MINB)
#else
#define BOUNDS
#endif
#if CONST_INPUTS
/* the step's inputs in constant memory: every thread reads the same entry at the same
   time, which the constant cache serves as an operand of the multiply-add itself */
__constant__ double cin[CIN];
#define XB(q) cin[(q)]
#define CHI(q) cin[OFF_CHI + (q)]
#define XN(q) cin[OFF_XN + (q)]
#define XE(q) cin[OFF_XE + (q)]
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#define XB(q) Xb[q]
#define CHI(q) chi[q]
#define XN(q) Xn[q]
#define XE(q) Xe[q]
#endif
__device__ __forceinline__ double phi(double x) { double f, g; phi_dphi(x, &f, &g); return f; }

extern "C" __global__ void BOUNDS sweep(T* U, T* V, const T* U0, T* SU, T* SV,
                                 const double* Xb, const double* chi, const double* Xn,
                                 const double* Xe, const double* hu, const double* hv,
                                 const double step_u, const double step_v,
                                 const double w0, const long long N,
                                 const long long block, double* out)
{
    const long long p0 = (long long)blockIdx.x * block;
    const long long p1 = p0 + block < N ? p0 + block : N;
    double acc[KC > 0 ? KC : 1];
    for (int k = 0; k < KC; ++k) acc[k] = 0.0;
    for (long long p = p0 + threadIdx.x; p < p1; p += NTH) {
        double u[D], v[DO];
UNROLL
        for (int j = 0; j < D; ++j) u[j] = (double)U[j * N + p];
UNROLL
        for (int o = 0; o < DO; ++o) v[o] = (double)V[o * N + p];
#if NB > 0
        double du[D], dv[DO];
UNROLL
        for (int j = 0; j < D; ++j) du[j] = 0.0;
UNROLL
        for (int o = 0; o < DO; ++o) dv[o] = 0.0;
UNROLL
        for (int i = 0; i < NB; ++i) {
            double h = 0.0, s = 0.0, f, g;
UNROLL
            for (int j = 0; j < D; ++j) h += XB(i * D + j) * u[j];
UNROLL
            for (int o = 0; o < DO; ++o) s += CHI(i * DO + o) * v[o];
            phi_dphi(h, &f, &g);
            const double e = s * g;
UNROLL
            for (int j = 0; j < D; ++j) du[j] += XB(i * D + j) * e;
UNROLL
            for (int o = 0; o < DO; ++o) dv[o] += CHI(i * DO + o) * f;
        }
#if PLAIN
UNROLL
        for (int j = 0; j < D; ++j) u[j] -= step_u * du[j];
UNROLL
        for (int o = 0; o < DO; ++o) v[o] -= step_v * dv[o];
#else
        /* the optimizer's rule on every coordinate, with its state (slot s of row r: s*rows + r) */
UNROLL
        for (int j = 0; j < D; ++j) {
            UPDATE_U
        }
UNROLL
        for (int o = 0; o < DO; ++o) {
            UPDATE_V
        }
#endif
UNROLL
        for (int j = 0; j < D; ++j) { U[j * N + p] = (T)u[j]; u[j] = (double)(T)u[j]; }
UNROLL
        for (int o = 0; o < DO; ++o) { V[o * N + p] = (T)v[o]; v[o] = (double)(T)v[o]; }
#endif
        int c = 0;
UNROLL
        for (int i = 0; i < NN; ++i) {
            double h = 0.0;
UNROLL
            for (int j = 0; j < D; ++j) h += XN(i * D + j) * u[j];
            const double f = phi(h) * w0;
UNROLL
            for (int o = 0; o < DO; ++o) acc[c++] += f * v[o];
        }
UNROLL
        for (int e = 0; e < NE; ++e) {
            double h = 0.0;
UNROLL
            for (int j = 0; j < D; ++j) h += XE(e * D + j) * u[j];
            const double f = phi(h) * w0;
UNROLL
            for (int o = 0; o < DO; ++o) acc[c++] += f * v[o];
        }
#if STATS
        double xs[NE > 0 ? NE : 1];
UNROLL
        for (int e = 0; e < NE; ++e) {
            double h = 0.0, h0 = 0.0;
UNROLL
            for (int j = 0; j < D; ++j) {
                h += XE(e * D + j) * u[j];
                h0 += XE(e * D + j) * (double)U0[j * N + p];
            }
            const double x = phi(h), x0 = phi(h0);
            acc[c + e] += w0 * h * h;
            acc[c + NE + e] += w0 * (h - h0) * (h - h0);
            acc[c + 2 * NE + e] += w0 * x * x;
            acc[c + 3 * NE + e] += w0 * (x - x0) * (x - x0);
            xs[e] = x;
        }
UNROLL
        for (int e = 0; e < NE; ++e)
UNROLL
            for (int f = 0; f < NE; ++f) acc[c + 4 * NE + e * NE + f] += w0 * xs[e] * xs[f];
#endif
    }
    __shared__ double part[NTH / 32];
    for (int k = 0; k < KC; ++k) {          /* fixed-order reduction of the block's sums */
        double x = acc[k];
        for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(0xffffffffu, x, off);
        if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = x;
        __syncthreads();
        if (threadIdx.x == 0) {
            double t = 0.0;
            for (int w = 0; w < NTH / 32; ++w) t += part[w];
            out[(long long)blockIdx.x * KC + k] = t;
        }
        __syncthreads();
    }
}
"""


def _rule_update(rule, group: str, rows: str, index: str, z: str, inc: str, hyper: str) -> str:
    """The C statements that move coordinate ``z`` of a particle by the rule, fed ``inc``,
    with its slots loaded from and stored to the state array ``group``."""
    k = len(rule.slots)
    at = [f"((long long)({s} * {rows} + {index}) * N + p)" for s in range(k)]
    lines = [f"double s{s} = (double){group}[{at[s]}];" for s in range(k)]
    outs = ", ".join([f"&{z}"] + [f"&s{s}" for s in range(k)])
    args = ", ".join([z, inc] + [f"s{s}" for s in range(k)] + [hyper])
    lines.append(f"rule_step({args}, {outs});")
    lines += [f"{group}[{at[s]}] = (T)s{s};" for s in range(k)]
    return "\n            ".join(lines)


def constant_inputs(d: int, d_out: int, nb: int, nn: int, ne: int) -> bool:
    """Whether a step's inputs (Xb, χ, the next batch, the eval inputs) fit the constant
    memory the kernel reserves for them (``MAX_CONSTANT_BYTES``)."""
    return 8 * max(1, (nb + nn + ne) * d + nb * d_out) <= MAX_CONSTANT_BYTES


def cuda_source(phi_code: int, rule_code: int, storage: str, d: int, d_out: int, nb: int,
                nn: int, ne: int, stats: bool, constant: bool = False,
                min_blocks: int = 1) -> str:
    """The kernel's whole source for one configuration: φ of the registry position
    ``phi_code``, the coordinate rule of ``rule_code``, storage "double" or "float",
    the sizes, whether the statistics columns are summed, and whether the step's inputs
    are read from constant memory (packed Xb, χ, Xn, Xe: :func:`constant_inputs`) or
    from the pointer arguments; ``min_blocks`` > 1 asks the compiler for registers that
    let that many blocks share a multiprocessor."""
    rule = rule_of_code(rule_code)
    defines = dict(NTH=THREADS, D=d, DO=d_out, NB=nb, NN=nn, NE=ne, STATS=int(stats),
                   PLAIN=int(rule.plain), KC=n_columns(nn, ne, d_out, stats),
                   CONST_INPUTS=int(constant), MINB=int(min_blocks),
                   CIN=max(1, (nb + nn + ne) * d + nb * d_out), OFF_CHI=nb * d,
                   OFF_XN=nb * (d + d_out), OFF_XE=nb * (d + d_out) + nn * d)
    head = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    functions = (f"typedef {storage} T;\n" + FAST_TANH
                 + device_function(_ENTRIES[phi_code].kernel, "phi_dphi"))
    body = _SOURCE
    if not rule.plain:
        functions += device_function(rule.step, "rule_step", hyper=rule.hyper)
        body = (body.replace("UPDATE_U", _rule_update(rule, "SU", "D", "j", "u[j]",
                                                       "step_u * du[j]", "hu"))
                .replace("UPDATE_V", _rule_update(rule, "SV", "DO", "o", "v[o]",
                                                  "step_v * dv[o]", "hv")))
    return head + functions + body


@lru_cache(maxsize=None)
def _module(*config):
    import cupy as cp
    return cp.RawModule(code=cuda_source(*config))


def fits(d: int) -> bool:
    """Whether the fused kernel takes inputs of dimension d (else the array twin)."""
    return d <= MAX_D


def launch_choice(d: int, nb: int) -> tuple[str, int]:
    """The kernel variant for inputs of dimension ``d`` and ``nb`` batch rows, as measured
    on two H200 leases at N = 10⁷ (docs/performance.md, "On a GPU"): where d · B ≥ 256
    the step's inputs come from constant memory and the compiler is asked for registers
    that let two blocks share a multiprocessor (d = 16, B = 16: 63 % of the roofline
    against 40 % through pointers, where one block's loads go unhidden); elsewhere
    pointers with one block were the fastest or within 2 % of it (56–80 %)."""
    if d * nb >= 256:
        return "constant", 2
    return "global", 1


def sweep_cuda(args, b, inputs: str = "auto", min_blocks: int | None = None):
    """The twin's contract (sweep_numpy.py) on CuPy arrays: update the particles (and the
    optimizer's state) in place, return the (nb, K) device array of per-block sums.
    Equal weights only (a weight array of length 1), as Monte Carlo particles have.
    ``inputs``: "global" pointers, "constant" memory for the step's inputs, or "auto"
    (the default: :func:`launch_choice`, constant memory only where the inputs fit);
    ``min_blocks``: see :func:`cuda_source` (None: :func:`launch_choice`'s)."""
    cp, a = b.xp, args.data
    U, V, Xb, Xn, Xe = a.U, a.V, a.Xb, a.Xn, a.Xe
    d, N = U.shape
    do = V.shape[0]
    nb = (N + a.block - 1) // a.block
    stats = bool(a.stats and len(Xe))
    storage = "double" if U.dtype == np.float64 else "float"
    plain = rule_of_code(len(args.rule) - 1).plain
    inputs, chosen = launch_choice(d, len(Xb)) if inputs == "auto" else (inputs, 1)
    min_blocks = chosen if min_blocks is None else min_blocks
    constant = inputs == "constant" and constant_inputs(d, do, len(Xb), len(Xn), len(Xe))
    module = _module(len(args.phi) - 1, len(args.rule) - 1, storage, d, do, len(Xb), len(Xn),
                     len(Xe), stats, constant, min_blocks)
    kern = module.get_function("sweep")
    K = n_columns(len(Xn), len(Xe), do, stats)
    out = cp.empty((nb, K))
    f64 = lambda x: cp.ascontiguousarray(cp.asarray(x, dtype=cp.float64))  # noqa: E731
    empty = cp.zeros(1, U.dtype)
    if constant:              # packed in the kernel's order, copied in stream order
        packed = cp.concatenate([f64(x).ravel() for x in (Xb, a.chi, Xn, Xe)]
                                + [cp.zeros(1)])
        module.get_global("cin").copy_from_device_async(packed.data, packed.nbytes - 8)
    # the hyperparameters as device arrays in the rule's layout (one spare entry: a
    # rule without hyperparameters still gets a valid pointer)
    hu, hv = f64(np.array(args.hyper_u + (0.0,))), f64(np.array(args.hyper_v + (0.0,)))
    kern((nb,), (THREADS,),
         (U, V, a.U0 if stats else empty, empty if plain else a.SU, empty if plain else a.SV,
          f64(Xb) if len(Xb) else hu, f64(a.chi) if len(Xb) else hu,
          f64(Xn) if len(Xn) else hu, f64(Xe) if len(Xe) else hu, hu, hv,
          np.float64(a.scale_u), np.float64(a.scale_v), np.float64(a.w[0]), np.int64(N),
          np.int64(a.block), out))
    return out
