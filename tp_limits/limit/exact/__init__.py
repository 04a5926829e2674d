"""The exact limits of linear networks (φ = id), no Monte Carlo: any program over
coefficient vectors of Gaussian primitives (``program.py``, docs/theory.md §4.5), and the
closed form of a plain one-hidden-layer network (``one_hidden.py``, §2.4)."""
from .program import LinearEngine

__all__ = ["LinearEngine"]
