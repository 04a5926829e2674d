"""The output columns of one particle sweep, described once for the kernel, its twin
and the engine that reads them.

A sweep returns per-block weighted sums, one row per particle block, with
these columns in this order (docs/theory.md §2):

    f_next           Bn·d_out   Σ w Z^{nV}_o φ(Z^U ξ_i)       next batch (i, o)
    f_eval           E·d_out    Σ w Z^{nV}_o φ(Z^U ζ_e)       eval inputs (e, o)
    h_sq, dh_sq      E, E       Σ w h², Σ w (h − h_0)²         (stats only)
    x_sq, dx_sq      E, E       Σ w x², Σ w (x − x_0)²         x = φ(h)
    feature_kernel   E·E        Σ w x_e x_e'

with h = Z^U ζ_e.  The Numba kernel writes these offsets, its NumPy twin
stacks its arrays in the same order, and :class:`SweepColumns` reads them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STAT_FIELDS = ("h_sq", "dh_sq", "x_sq", "dx_sq")


def n_columns(Bn: int, E: int, d_out: int, stats: bool) -> int:
    """K: the number of columns of a sweep's output."""
    return (Bn + E) * d_out + (4 * E + E * E if stats else 0)


@dataclass(frozen=True)
class SweepColumns:
    Bn: int
    E: int
    d_out: int
    stats: bool

    @property
    def width(self) -> int:
        return n_columns(self.Bn, self.E, self.d_out, self.stats)

    @property
    def f_next(self) -> slice:
        return slice(0, self.Bn * self.d_out)

    @property
    def f_eval(self) -> slice:
        return slice(self.Bn * self.d_out, (self.Bn + self.E) * self.d_out)

    def next_outputs(self, total) -> np.ndarray:
        """(Bn, d_out) Σ w Z^{nV} φ(Z^U ξ) of the next batch from the summed row."""
        return total[self.f_next].reshape(self.Bn, self.d_out)

    def eval_outputs(self, row) -> np.ndarray:
        """(..., E, d_out) eval-input sums from one row or a stack of rows."""
        return row[..., self.f_eval].reshape(*row.shape[:-1], self.E, self.d_out)

    def moments(self, total) -> dict:
        """name -> (E,) second moments, and the (E, E) feature kernel (stats columns only)."""
        c0, E = (self.Bn + self.E) * self.d_out, self.E
        out = {k: total[c0 + j * E:c0 + (j + 1) * E] for j, k in enumerate(STAT_FIELDS)}
        out["feature_kernel"] = total[c0 + 4 * E:].reshape(E, E)
        return out
