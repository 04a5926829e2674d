"""The one-hidden-layer limit: particles (``particles.py``), the fused Numba sweep
(``sweep.py``, with ``fastmath.py``) and its NumPy twin (``sweep_numpy.py``),
the sweep's output columns (``columns.py``), the exact linear form
(``linear.py``) and the engines that drive them (``engine.py``)."""
from .engine import LinearEngine, ParticleEngine

__all__ = ["LinearEngine", "ParticleEngine"]
