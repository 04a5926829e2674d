"""The fused particle sweep of sweep.py as a CUDA kernel, for the one-hidden-layer limit
on a GPU (docs/theory.md §2; the update rules of §10 for the optimizer state).

One launch = one sweep = one step: each CUDA thread block owns one particle
block of the batch-means error (``block`` particles, as on the CPU); each
thread takes every 256th particle of it, reads its Z^U, Z^{nV} (and optimizer
state) once, updates them in registers with the batch (Xb, χ), writes them
back, and adds the particle's weighted columns (columns.py) to its own
sums; the block then reduces the 256 partial sums in a fixed order and
writes its row of ``out``.  No atomics: the result does not depend on
scheduling.  (Four particles per thread unrolled, with a reduction per 1024
particles, measured no faster at d = 1 and 1.6x slower at d = 16, B = 16:
the unrolled registers spill.)  Arithmetic is float64 whatever the storage dtype, and the
updated particles are read back as stored (rounded), as the NumPy twin does.

The sizes (d, d_out, batch rows, next and eval rows), the statistics flag,
the optimizer kind and φ are compile-time constants, so the per-particle
arrays live in registers; a kernel is compiled once per such configuration
(NVRTC, cached on disk by CuPy).  Inputs wider than ``MAX_D`` would spill
those registers: the whole-array twin (sweep_numpy.py) is used there.
The tests check this kernel against that twin on the same device.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .columns import n_columns
from .sweep import PHI_CODES

THREADS = 256
MAX_D = 64           # beyond this the per-particle arrays no longer fit in registers

_PHI = {
    "id": "*f = x; *g = 1.0;",
    "tanh": "double t = fast_tanh(x); *f = t; *g = 1.0 - t * t;",
    "relu": "*f = x > 0.0 ? x : 0.0; *g = x > 0.0 ? 1.0 : 0.0;",
    "sigmoid": "double s = 0.5 * (1.0 + fast_tanh(0.5 * x)); *f = s; *g = s * (1.0 - s);",
    "gelu": ("double c = 0.5 * (1.0 + erf(x * 0.70710678118654752440)); *f = x * c; "
             "*g = c + x * 0.39894228040143267794 * exp(-0.5 * x * x);"),
    "erf": "*f = erf(x); *g = 1.12837916709551257390 * exp(-x * x);",
    "softplus": ("*f = fmax(x, 0.0) + log1p(exp(-fabs(x))); "
                 "*g = 0.5 * (1.0 + fast_tanh(0.5 * x));"),
}
assert set(_PHI) == set(PHI_CODES)

#: fastmath.py's branch-free tanh (≤ 4 ulp): CUDA's own tanh branches on |x|, and the
#: warps of a sweep, whose pre-activations straddle its threshold, would take both ways
FAST_TANH = r"""
__device__ __forceinline__ double fast_tanh(double x) {
    const double y = 2.0 * fmin(fabs(x), 20.0);
    const double k = floor(y * 1.4426950408889634 + 0.5);
    const double r = (y - k * 0.693145751953125) - k * 1.4286068203094173e-06;
    const double s = __longlong_as_double((long long)(k + 1023.0) << 52);
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;  p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;      p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;        p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;         p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;                p = p * r + 1.0;
    const double e = (s - 1.0) + s * (p * r);
    return copysign(e / (e + 2.0), x);
}
"""

_SOURCE = FAST_TANH + r"""
typedef STORAGE T;
__device__ __forceinline__ void phi_dphi(double x, double* f, double* g) { PHI_BODY }
__device__ __forceinline__ double phi(double x) { double f, g; phi_dphi(x, &f, &g); return f; }

extern "C" __global__ void sweep(T* U, T* V, const T* U0, T* SU, T* SV,
                                 const double* Xb, const double* chi, const double* Xn,
                                 const double* Xe, const double* hp, const double step_u,
                                 const double step_v, const double w0, const long long N,
                                 const long long block, double* out)
{
    const long long p0 = (long long)blockIdx.x * block;
    const long long p1 = p0 + block < N ? p0 + block : N;
    double acc[KC > 0 ? KC : 1];
    for (int k = 0; k < KC; ++k) acc[k] = 0.0;
    for (long long p = p0 + threadIdx.x; p < p1; p += NTH) {
        double u[D], v[DO];
        for (int j = 0; j < D; ++j) u[j] = (double)U[j * N + p];
        for (int o = 0; o < DO; ++o) v[o] = (double)V[o * N + p];
#if NB > 0
        double du[D], dv[DO];
        for (int j = 0; j < D; ++j) du[j] = 0.0;
        for (int o = 0; o < DO; ++o) dv[o] = 0.0;
        for (int i = 0; i < NB; ++i) {
            double h = 0.0, s = 0.0, f, g;
            for (int j = 0; j < D; ++j) h += Xb[i * D + j] * u[j];
            for (int o = 0; o < DO; ++o) s += chi[i * DO + o] * v[o];
            phi_dphi(h, &f, &g);
            const double e = s * g;
            for (int j = 0; j < D; ++j) du[j] += Xb[i * D + j] * e;
            for (int o = 0; o < DO; ++o) dv[o] += chi[i * DO + o] * f;
        }
#if MODE == 0
        for (int j = 0; j < D; ++j) u[j] -= step_u * du[j];
        for (int o = 0; o < DO; ++o) v[o] -= step_v * dv[o];
#elif MODE == 1
        /* heavy ball with coupled decay: M <- mu M + delta Z + increment, Z <- Z - M */
        for (int j = 0; j < D; ++j) {
            const long long a = (long long)j * N + p;
            const T m = (T)((double)(T)(hp[0] * (double)SU[a]) + hp[1] * u[j] + step_u * du[j]);
            SU[a] = m;
            u[j] -= (double)m;
        }
        for (int o = 0; o < DO; ++o) {
            const long long a = (long long)o * N + p;
            const T m = (T)((double)(T)(hp[0] * (double)SV[a]) + hp[2] * v[o] + step_v * dv[o]);
            SV[a] = m;
            v[o] -= (double)m;
        }
#else
        /* Adam on the gradient g = step * increment, decoupled decay */
        for (int r = 0; r < D + DO; ++r) {
            const bool isu = r < D;
            const int q = isu ? r : r - D;
            T* S = isu ? SU : SV;
            const long long rows = isu ? D : DO;
            const long long a = (long long)q * N + p, b = (rows + q) * N + p;
            const double gr = isu ? step_u * du[q] : step_v * dv[q];
            const T m = (T)((double)(T)(hp[3] * (double)S[a]) + (1.0 - hp[3]) * gr);
            const T s2 = (T)((double)(T)(hp[4] * (double)S[b]) + (1.0 - hp[4]) * gr * gr);
            S[a] = m;
            S[b] = s2;
            const double den = sqrt((double)s2 / hp[7]) + hp[5];
            const double psi = den > 0.0 ? ((double)m / hp[6]) / den : 0.0;
            const double shrink = isu ? hp[1] : hp[2], lr = isu ? hp[8] : hp[9];
            double z = (double)(T)((isu ? u[q] : v[q]) * (1.0 - shrink));
            z -= lr * psi;
            if (isu) u[q] = z; else v[q] = z;
        }
#endif
        for (int j = 0; j < D; ++j) { U[j * N + p] = (T)u[j]; u[j] = (double)(T)u[j]; }
        for (int o = 0; o < DO; ++o) { V[o * N + p] = (T)v[o]; v[o] = (double)(T)v[o]; }
#endif
        int c = 0;
        for (int i = 0; i < NN; ++i) {
            double h = 0.0;
            for (int j = 0; j < D; ++j) h += Xn[i * D + j] * u[j];
            const double f = phi(h) * w0;
            for (int o = 0; o < DO; ++o) acc[c++] += f * v[o];
        }
        for (int e = 0; e < NE; ++e) {
            double h = 0.0;
            for (int j = 0; j < D; ++j) h += Xe[e * D + j] * u[j];
            const double f = phi(h) * w0;
            for (int o = 0; o < DO; ++o) acc[c++] += f * v[o];
        }
#if STATS
        double xs[NE > 0 ? NE : 1];
        for (int e = 0; e < NE; ++e) {
            double h = 0.0, h0 = 0.0;
            for (int j = 0; j < D; ++j) {
                h += Xe[e * D + j] * u[j];
                h0 += Xe[e * D + j] * (double)U0[j * N + p];
            }
            const double x = phi(h), x0 = phi(h0);
            acc[c + e] += w0 * h * h;
            acc[c + NE + e] += w0 * (h - h0) * (h - h0);
            acc[c + 2 * NE + e] += w0 * x * x;
            acc[c + 3 * NE + e] += w0 * (x - x0) * (x - x0);
            xs[e] = x;
        }
        for (int e = 0; e < NE; ++e)
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


@lru_cache(maxsize=None)
def _kernel(phi: str, storage: str, d: int, d_out: int, nb: int, nn: int, ne: int,
            stats: bool, mode: int):
    import cupy as cp
    defines = dict(NTH=THREADS, D=d, DO=d_out, NB=nb, NN=nn, NE=ne, STATS=int(stats),
                   MODE=mode, KC=n_columns(nn, ne, d_out, stats))
    head = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    src = head + _SOURCE.replace("STORAGE", storage).replace("PHI_BODY", _PHI[phi])
    return cp.RawKernel(src, "sweep")


def fits(d: int) -> bool:
    """Whether the fused kernel takes inputs of dimension d (else the array twin)."""
    return d <= MAX_D


def sweep_cuda(U, V, w, U0, phi: str, Xb, chi, step_u, step_v, Xn, Xe, stats: bool,
               block: int, SU=None, SV=None, hp=None, b=None):
    """The twin's contract (sweep_numpy.py) on CuPy arrays: update U, V (and the optimizer
    state) in place, return the (nb, K) device array of per-block sums.  Equal weights
    only (``w`` of length 1), as Monte Carlo particles have."""
    cp = b.xp
    d, N = U.shape
    do = V.shape[0]
    nb = (N + block - 1) // block
    mode = 0 if SU is None else SU.shape[0]
    stats = bool(stats and len(Xe))
    storage = "double" if U.dtype == np.float64 else "float"
    kern = _kernel(phi, storage, d, do, len(Xb), len(Xn), len(Xe), stats, mode)
    K = n_columns(len(Xn), len(Xe), do, stats)
    out = cp.empty((nb, K))
    f64 = lambda a: cp.ascontiguousarray(cp.asarray(a, dtype=cp.float64))  # noqa: E731
    empty = cp.zeros(1, U.dtype)
    hp_dev = f64(np.zeros(10) if hp is None else hp)
    kern((nb,), (THREADS,),
         (U, V, U0 if stats else empty, SU if mode else empty, SV if mode else empty,
          f64(Xb) if len(Xb) else hp_dev, f64(chi) if len(Xb) else hp_dev,
          f64(Xn) if len(Xn) else hp_dev, f64(Xe) if len(Xe) else hp_dev, hp_dev,
          np.float64(step_u), np.float64(step_v), np.float64(w[0]), np.int64(N),
          np.int64(block), out))
    return out
