"""The kernel regime: NNGP and NTK kernels (``kernels.py``, with the Gaussian pair
moments of ``pair_moments.py``) and kernel gradient descent (``descent.py``)."""
from .descent import KernelEngine
from .kernels import layer_kernels, nngp, ntk

__all__ = ["KernelEngine", "layer_kernels", "nngp", "ntk"]
