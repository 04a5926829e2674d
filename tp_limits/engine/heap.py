"""Keep a run's large temporaries on the heap, where freed memory is reused.

glibc serves every allocation above its mmap threshold (128 KiB, raised
dynamically up to 32 MiB as it sees them freed) with a fresh mapping, and a
fresh mapping costs a page fault at the first touch of every 4 KiB page.
The deep engine makes and drops several (B + E) x N float64 arrays per layer
and step (9.6 MB at N = 10⁵), more of them alive at once than the dynamic
threshold tracks, so a noticeable share of a run went into those faults
(docs/performance.md, "Deep limit").

:func:`reused_heap` raises the threshold (and the heap's trim threshold) for
the duration of a run and restores glibc's initial values afterwards,
returning the heap's free memory to the system.  Histories larger than the
threshold stay mappings of their own, released when they are freed.  Where
``mallopt`` is not glibc's (macOS, musl) it does nothing.
"""
from __future__ import annotations

import ctypes
from contextlib import contextmanager
from functools import lru_cache

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
INITIAL = 128 * 1024            # glibc's initial mmap and trim thresholds
RUN_THRESHOLD = 64 << 20        # temporaries up to 64 MiB come from the heap during a run


@lru_cache(maxsize=1)
def _glibc():
    """The C library the process already has loaded (no search: find_library would run
    ldconfig on every deep run), if it is glibc; else None."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version          # glibc only: its mallopt honours these options
        return libc
    except (OSError, AttributeError, TypeError):
        return None


@contextmanager
def reused_heap(threshold: int = RUN_THRESHOLD):
    libc = _glibc()
    if libc is None:
        yield
        return
    libc.mallopt(M_MMAP_THRESHOLD, threshold)
    libc.mallopt(M_TRIM_THRESHOLD, 4 * threshold)
    try:
        yield
    finally:
        libc.mallopt(M_MMAP_THRESHOLD, INITIAL)
        libc.mallopt(M_TRIM_THRESHOLD, INITIAL)
        libc.malloc_trim(0)
