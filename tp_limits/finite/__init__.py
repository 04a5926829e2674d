"""Finite layer: the same networks at width n (NumPy, or CuPy when installed)."""
from .ntk import empirical_ntk, initial_outputs
from .train import train_finite

__all__ = ["train_finite", "empirical_ntk", "initial_outputs"]
