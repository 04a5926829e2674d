"""The Monte Carlo limit of any feature-learning program (deep networks, and one-hidden-
layer ones the fused sweep does not take: biases, normalizations, Muon): hat families
(``families.py``, with the passes over their histories in ``passes.py`` and
``history_kernels.py``, and their Gram factors in ``gram.py``), the Ż estimators
(``zdot.py``, the tangent one built on ``tangent.py``), one run (``montecarlo.py``; under
Adam, or any optimizer not linear in the gradients, with partner particles,
``partners.py``; under Muon with a coefficient matrix over stored pairs, ``msign.py``) and
the replicated engine around them (``engine.py``)."""
from .engine import MonteCarloEngine

__all__ = ["MonteCarloEngine"]
