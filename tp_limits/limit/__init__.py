"""Limit layer: infinite-width training dynamics (NumPy + Numba)."""
from .dispatch import simulate_limit
from .kernel_gd import kernel_points
from .kernels import nngp, ntk

__all__ = ["simulate_limit", "kernel_points", "nngp", "ntk"]
