"""Array backends: NumPy (default) or CuPy (optional, imported lazily).

The engines are written once against a :class:`Backend`, which is chosen
once per run and passed down; nothing branches on the array library inline.

On NumPy, the heavy products go through SciPy's BLAS (``gemm``/``ger``) so
that the weight update is an in-place rank-B update (no n x n temporary)
and so that one BLAS thread pool serves the whole step: NumPy and SciPy
ship separate OpenBLAS builds, and alternating between the two pools in a
hot loop makes them fight over the cores.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import BackendUnavailableError, SpecError
from .aligned import as_aligned, zeros_aligned
from .options import BACKENDS


@dataclass(frozen=True)
class Backend:
    """An array module plus the few operations numpy and cupy spell differently."""

    name: str
    xp: Any
    erf: Callable
    matmul: Callable          # (a, b) -> a @ b
    add_outer: Callable       # (W, alpha, G, X) -> W += alpha * G.T @ X, in place
    to_numpy: Callable
    available_bytes: Callable
    #: (shape, dtype) -> zeroed array, and array -> the same values, both with their data
    #: on a cache line where that matters (the host: engine/aligned.py); a device
    #: allocator aligns its blocks anyway
    zeros_aligned: Callable
    as_aligned: Callable
    synchronize: Callable = lambda: None   # wait for queued device work (timings)
    #: host numpy Generator -> the backend's own generator of random arrays (on NumPy the
    #: host generator itself, so NumPy runs keep their fixed-seed values)
    generator: Callable = lambda rng: rng
    #: entries of a scratch block for passes over an n x n matrix: 1 MiB of float64 on
    #: the host (stays in L2); large on a device, where each block is a kernel launch
    scratch_entries: int = 1 << 17

    def asarray(self, a, dtype):
        return self.xp.asarray(a, dtype=dtype)


# ---- NumPy -------------------------------------------------------------------
def _np_blas(name: str, dtype):
    from scipy.linalg import blas
    return blas.get_blas_funcs(name, dtype=dtype)


def _as_fortran_transposed(M):
    """(F-ordered array, trans flag) that represent Mᵀ for BLAS without a copy."""
    if M.flags.c_contiguous:
        return M.T, 0                          # Mᵀ of a C array is Fortran-ordered
    if M.flags.f_contiguous:
        return M, 1
    return np.ascontiguousarray(M).T, 0


def _np_matmul(a, b):
    """a @ b through SciPy's BLAS gemm (gemv for one row or one column), returned
    C-ordered.

    In Fortran order (a @ b)ᵀ = bᵀ aᵀ; transposed views select gemm's
    trans flags instead of copying an n x n operand.  A batch of one (the
    forward and backward products of batch-1 SGD, a Lanczos matvec) goes to
    gemv, which streams the matrix once at about twice gemm's speed there.
    """
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.dtype.char not in "fd":
        return a @ b
    if a.shape[0] == 1 and min(b.shape) > 0:    # one row: gemv streams b once (gemm does not)
        bt, tb = _as_fortran_transposed(b)      # y = op(bt) a_0 = bᵀ a_0
        return _np_blas("gemv", a.dtype)(1.0, bt, a[0], trans=tb)[None, :]
    if b.shape[1] == 1 and min(a.shape) > 0:    # one column: y = a b_0
        at, ta = _as_fortran_transposed(a)
        return _np_blas("gemv", a.dtype)(1.0, at, b[:, 0], trans=1 - ta)[:, None]
    gemm = _np_blas("gemm", a.dtype)
    bt, tb = _as_fortran_transposed(b)
    at, ta = _as_fortran_transposed(a)
    return gemm(1.0, bt, at, trans_a=tb, trans_b=ta).T


def _np_add_outer(W, alpha, G, X):
    """W += alpha * Gᵀ X in place, for W (n_out, n_in) C-ordered, G (B, n_out), X (B, n_in)."""
    Wt = W.T                                   # Fortran-ordered view (n_in, n_out)
    if G.shape[0] == 1:
        ger = _np_blas("ger", W.dtype)
        out = ger(alpha, X[0], G[0], a=Wt, overwrite_a=True)
    else:
        gemm = _np_blas("gemm", W.dtype)
        xt, tx = _as_fortran_transposed(X)     # represents operand a = Xᵀ
        gt, tg = _as_fortran_transposed(G.T)   # represents operand b = G
        out = gemm(alpha, xt, gt, beta=1.0, c=Wt, trans_a=tx, trans_b=tg, overwrite_c=True)
    if not np.shares_memory(out, W):           # BLAS wrappers copy when layouts mismatch
        W[...] = out.T


def _mem_available() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def _numpy_backend() -> Backend:
    from scipy.special import erf
    return Backend("numpy", np, erf, _np_matmul, _np_add_outer, np.asarray, _mem_available,
                   zeros_aligned, as_aligned)


# ---- CuPy --------------------------------------------------------------------
def _cupy_backend() -> Backend:
    try:
        import cupy as cp
        from cupyx.scipy.special import erf
        cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # ImportError, CUDA driver errors
        raise BackendUnavailableError(
            f"backend='cupy' needs CuPy and a CUDA device ({type(exc).__name__}: {exc}). "
            "Install it with pip install 'tp_limits[gpu]' or use backend='numpy'") from None

    from cupy import cublas

    def add_outer(W, alpha, G, X):
        # W (C-ordered) += alpha Gᵀ X in place: cuBLAS gemm with beta = 1
        # writes into W, where `W += alpha * (G.T @ X)` would first build an
        # n x n temporary (one more full pass over the largest arrays).
        if not (W.flags.c_contiguous or W.flags.f_contiguous):
            W += alpha * (G.T @ X)
            return
        cublas.gemm("T", "N", G, X, out=W, alpha=alpha, beta=1.0)

    def available_bytes():
        # the driver's free memory plus what CuPy's pool holds freed for reuse
        return int(cp.cuda.Device().mem_info[0]) + int(cp.get_default_memory_pool().free_bytes())

    return Backend("cupy", cp, erf, lambda a, b: a @ b, add_outer, cp.asnumpy, available_bytes,
                   cp.zeros, lambda a: a, lambda: cp.cuda.Device().synchronize(),
                   lambda rng: cp.random.default_rng(int(rng.integers(2 ** 63))), 1 << 24)


def get_backend(name: str = "numpy") -> Backend:
    """Return the backend called ``name`` ('numpy' or 'cupy')."""
    if isinstance(name, Backend):
        return name
    if name == "numpy":
        return _numpy_backend()
    if name == "cupy":
        return _cupy_backend()
    raise SpecError(f"unknown backend {name!r}; choose one of {BACKENDS}")


def numpy_backend() -> Backend:
    return _numpy_backend()
