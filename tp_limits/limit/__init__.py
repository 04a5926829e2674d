"""Limit layer: infinite-width training dynamics (NumPy + Numba)."""
from .dispatch import simulate_limit

__all__ = ["simulate_limit"]
