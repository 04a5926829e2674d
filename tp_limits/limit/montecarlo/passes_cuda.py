"""The conditional-mean pass of a hat family as one CUDA kernel that reads the stored hats
once (docs/theory.md §4.7).

``mean_and_cross(C, R, Z, r)`` must return Z ← Z + Cᵀ R and the cross products
R Z[:r]ᵀ of the *new* Z with the k stored hats R (k, N).  Taken literally that reads R
twice: the new Z needs every stored row before any cross product can start.  But the
family keeps the Gram matrix of its stored hats, Ch = R Rᵀ / N, so

    R (Z + Cᵀ R)[:r]ᵀ = R Z[:r]ᵀ + N · Ch C[:, :r],

and both R Z[:r]ᵀ (a reduction over the particles) and Cᵀ R (a broadcast over them) can be
formed from the same read of R.  The remaining k × k × r product reads Ch once (k² entries
against the k·N of R: a pass is fused only when N ≥ ``MIN_N_PER_ROW`` · k).  With float64
storage the new hats are not rounded, so the identity is exact up to the order of the sums;
float32 storage rounds the new Z before its cross products are taken, and keeps the two
reads (passes.py).

The kernel: a thread block owns ``THREADS`` · P columns (particles) and a range of rows; each
thread holds the m sums of its P columns in registers (the new Z) and the r values Z[:r]
of them, and per stored row adds its share of the cross products, which a warp reduces by
shuffles and the block by one shared-memory sum per 32 rows.  Blocks write their own
partial sums (no atomics), which fixed-order sums then combine, so a run is reproducible.
Rows are split over several blocks per column range only when there are too few column
ranges to fill the device.  The tests check the kernel against the two-read pass on the
device (tests/test_limit_gpu.py) and, without one, that its source compiles.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .passes import ArrayPasses

THREADS = 256
#: the most new rows m a block keeps in registers (beyond: the two-read pass)
MAX_ROWS = 32
#: fuse only where the stored hats outweigh their Gram matrix: N ≥ this · k
MIN_N_PER_ROW = 4
#: the most new rows whose cross products a block keeps (its shared sums: 8·32·r doubles)
MAX_KEPT = 16
#: blocks in flight per multiprocessor the row split aims at
BLOCKS_PER_SM = 4
#: stored rows loaded together (loads in flight per thread: UNROLL · P)
UNROLL = 4

_SOURCE = r"""
typedef double T;
extern "C" __global__ void __launch_bounds__(NTH)
mean_cross(const T* __restrict__ R, const double* __restrict__ C, double* __restrict__ Z,
           double* __restrict__ Zpart, double* __restrict__ Xpart,
           const long long k, const long long N, const long long rows_per)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long c0 = (long long)blockIdx.x * (NTH * P);
    const long long i0 = (long long)blockIdx.y * rows_per;
    const long long i1 = i0 + rows_per < k ? i0 + rows_per : k;
    long long col[P];
    bool ok[P];
    double acc[M][P];
#if RR > 0
    double zo[RR][P];
    __shared__ double sX[NTH / 32][32][RR];
#endif
    __shared__ double sC[32][M];
#pragma unroll
    for (int p = 0; p < P; ++p) {
        col[p] = c0 + threadIdx.x + p * NTH;
        ok[p] = col[p] < N;
#pragma unroll
        for (int j = 0; j < M; ++j) acc[j][p] = 0.0;
#if RR > 0
#pragma unroll
        for (int j = 0; j < RR; ++j) zo[j][p] = ok[p] ? Z[j * N + col[p]] : 0.0;
#endif
    }
    for (long long ib = i0; ib < i1; ib += 32) {
        const int nrow = (int)(i1 - ib < 32 ? i1 - ib : 32);
        __syncthreads();                       /* the previous chunk's sC and sX are read */
        for (int e = threadIdx.x; e < nrow * M; e += NTH)
            sC[e / M][e % M] = C[(ib + e / M) * M + e % M];
        __syncthreads();
#if RR > 0
        double keep[RR];
#pragma unroll
        for (int j = 0; j < RR; ++j) keep[j] = 0.0;
#endif
        for (int q0 = 0; q0 < nrow; q0 += UR) {
            double r[UR][P];                   /* UR rows' loads in flight at once */
#pragma unroll
            for (int u = 0; u < UR; ++u) {
                const bool live = q0 + u < nrow;
                const T* Ri = R + (ib + q0 + u) * N;
#pragma unroll
                for (int p = 0; p < P; ++p) r[u][p] = (live && ok[p]) ? (double)Ri[col[p]] : 0.0;
            }
#pragma unroll
            for (int u = 0; u < UR; ++u) {
                const int q = q0 + u;
                if (q >= nrow) break;          /* the same for every thread of the block */
#pragma unroll
                for (int j = 0; j < M; ++j) {
                    const double c = sC[q][j];
#pragma unroll
                    for (int p = 0; p < P; ++p) acc[j][p] += c * r[u][p];
                }
#if RR > 0
#pragma unroll
                for (int j = 0; j < RR; ++j) {
                    double s = 0.0;
#pragma unroll
                    for (int p = 0; p < P; ++p) s += r[u][p] * zo[j][p];
#pragma unroll
                    for (int off = 16; off > 0; off >>= 1)
                        s += __shfl_xor_sync(0xffffffffu, s, off);
                    if (lane == q) keep[j] = s;
                }
#endif
            }
        }
#if RR > 0
        if (lane < nrow) {
#pragma unroll
            for (int j = 0; j < RR; ++j) sX[warp][lane][j] = keep[j];
        }
        __syncthreads();
        for (int e = threadIdx.x; e < nrow * RR; e += NTH) {
            double t = 0.0;
            for (int w = 0; w < NTH / 32; ++w) t += sX[w][e / RR][e % RR];
            Xpart[((long long)blockIdx.x * k + ib + e / RR) * RR + e % RR] = t;
        }
#endif
    }
#pragma unroll
    for (int p = 0; p < P; ++p) {
        if (!ok[p]) continue;
#pragma unroll
        for (int j = 0; j < M; ++j) {
            if (gridDim.y == 1) Z[j * N + col[p]] += acc[j][p];
            else Zpart[((long long)blockIdx.y * M + j) * N + col[p]] = acc[j][p];
        }
    }
}
"""


def columns_per_thread(m: int) -> int:
    """P: as many columns per thread as keep the m·P sums in registers (m·P ≤ 32)."""
    return max(1, min(4, 32 // max(m, 1)))


def cuda_source(m: int, r: int) -> str:
    """The kernel's source for m new rows of which the first r are kept (cross products)."""
    defines = dict(NTH=THREADS, M=m, RR=r, P=columns_per_thread(m), UR=UNROLL)
    return "".join(f"#define {k} {v}\n" for k, v in defines.items()) + _SOURCE


@lru_cache(maxsize=None)
def _kernel(m: int, r: int):
    import cupy as cp
    return cp.RawKernel(cuda_source(m, r), "mean_cross")


@lru_cache(maxsize=None)
def _multiprocessors() -> int:
    import cupy as cp
    return int(cp.cuda.Device().attributes["MultiProcessorCount"])


def row_split(k: int, column_blocks: int, multiprocessors: int) -> int:
    """Rows per block: all k rows, unless the column ranges alone leave the device short of
    ``BLOCKS_PER_SM`` blocks per multiprocessor; then the rows are split in chunks that are
    multiples of 32 (the kernel's row chunk)."""
    want = -(-BLOCKS_PER_SM * multiprocessors // max(column_blocks, 1))
    splits = max(1, min(want, -(-k // 32)))
    per = -(-k // splits)
    return -(-per // 32) * 32


def fused_mean_and_cross(C, R, Z, rows: int, hat_gram, xp):
    """Z ← Z + Cᵀ R in place and R Z[:rows]ᵀ of the new Z, reading R (k, N) float64 once;
    ``hat_gram`` = R Rᵀ / N (the family's Ch).  See the module docstring."""
    k, N = R.shape
    m = Z.shape[0]
    P = columns_per_thread(m)
    cb = -(-N // (THREADS * P))
    per = row_split(k, cb, _multiprocessors())
    splits = -(-k // per)
    Cc = xp.ascontiguousarray(C, dtype=np.float64)
    Zpart = xp.empty((splits, m, N)) if splits > 1 else xp.empty(1)
    Xpart = xp.empty((cb, k, rows)) if rows else xp.empty(1)
    _kernel(m, rows)((cb, splits), (THREADS,),
                     (R, Cc, Z, Zpart, Xpart, np.int64(k), np.int64(N), np.int64(per)))
    if splits > 1:
        Z += Zpart.sum(axis=0)
    if not rows:
        return None
    return Xpart.sum(axis=0) + N * _block_times(hat_gram, xp.ascontiguousarray(Cc[:, :rows]))


def _block_times(G, X):
    """G X for a row-major block G (k, k) of a larger array (row stride ld) and a C-ordered
    X (k, r), by one cuBLAS gemm on the block in place: the library's product would first
    copy the k × k block into contiguous memory.  In column-major terms G is Gᵀ with
    leading dimension ld, X is Xᵀ (r × k) and the result (G X)ᵀ = Xᵀ Gᵀ."""
    import cupy as cp
    from cupy.cuda import cublas, device
    k, r = X.shape
    out = cp.empty((k, r))
    if G.strides[1] != G.itemsize:
        G = cp.ascontiguousarray(G)
    cublas.dgemm(device.get_cublas_handle(), cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, r, k, k,
                 _ONE.ctypes.data, X.data.ptr, r, G.data.ptr, G.strides[0] // G.itemsize,
                 _ZERO.ctypes.data, out.data.ptr, r)
    return out


_ONE, _ZERO = np.array(1.0), np.array(0.0)


class CudaPasses(ArrayPasses):
    """CuPy with the fused conditional-mean pass where it applies (float64 rows, at most
    ``MAX_ROWS`` new rows, N ≥ ``MIN_N_PER_ROW`` · k); the array passes elsewhere."""

    def mean_and_cross(self, C, R, Z, rows: int, hat_gram=None):
        k, N = R.shape
        if (hat_gram is None or R.dtype != np.float64 or len(Z) > MAX_ROWS
                or rows > MAX_KEPT or N < MIN_N_PER_ROW * k or not R.flags.c_contiguous
                or not Z.flags.c_contiguous):
            return super().mean_and_cross(C, R, Z, rows)
        return fused_mean_and_cross(C, R, Z, rows, hat_gram, self.xp)
