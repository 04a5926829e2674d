"""The deep (L >= 2) feature-learning limit: hat families (``families.py``, with the
mixed-precision passes of ``mixed_precision.py``), the Ż estimators
(``zdot.py``, the tangent one built on ``tangent.py``), the Monte Carlo
engine (``montecarlo.py``) and the exact engine for linear networks
(``linear.py``)."""
from .linear import LinearEngine
from .montecarlo import MonteCarloEngine

__all__ = ["LinearEngine", "MonteCarloEngine"]
