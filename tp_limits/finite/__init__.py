"""Finite layer: the same networks at width n (NumPy, or CuPy when installed)."""
from .train import train_finite

__all__ = ["train_finite"]
