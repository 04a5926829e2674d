"""The deep (L >= 2) feature-learning limit: hat families (``families.py``, with the
passes over their histories in ``passes.py`` and ``history_kernels.py`` and their
Gram factors in ``gram.py``), the Ż estimators
(``zdot.py``, the tangent one built on ``tangent.py``), one Monte Carlo run
(``montecarlo.py``; under Adam, or any optimizer not linear in the gradients, with
partner particles, ``partners.py``), the
replicated engine around them (``engine.py``) and the exact engine for linear
networks (``linear.py``)."""
from .engine import MonteCarloEngine
from .linear import LinearEngine

__all__ = ["LinearEngine", "MonteCarloEngine"]
