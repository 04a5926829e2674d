"""The fused fast path: the one-hidden-layer limit of a plain program under a coordinatewise
optimizer (chosen when the program matches it): particles (``particles.py``); one sweep per step, described
by the record of ``contract.py`` and run by one of ``sweeps.py``'s three kernels — the
fused Numba kernel (``sweep.py`` drives it: ``blocks.py`` cuts the particles into
blocks, ``update.py`` and ``forward.py`` are its two steps, ``tiles.py`` its
pre-activations, ``phi.py`` and ``rule.py`` the nonlinearity and the optimizer's
coordinate rule dispatched from their registries), its NumPy twin
(``sweep_numpy.py``) and the generated CUDA kernel (``sweep_cuda.py``); the sweep's
output columns (``columns.py``) and the engines that drive them (``engine.py``; the exact
linear form is exact/one_hidden.py)."""
from .engine import LinearEngine, ParticleEngine

__all__ = ["LinearEngine", "ParticleEngine"]
