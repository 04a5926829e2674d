"""tp_limits: infinite-width limits of abc-parametrized MLPs (Tensor Programs IV).

Symbolic layer (exact): :class:`ABC`, presets :func:`sp`, :func:`ntp`,
:func:`mfp`, :func:`mup`, :func:`table`.
"""
from . import spectral
from .analysis.phase_diagram import phase_diagram
from .abc import ABC, Classification, mfp, mup, ntp, sp, table
from .errors import (DivergenceError, InvalidParametrizationError, SpecError,
                     SymbolicParametrizationError, TPError, UnstableParametrizationError)

__version__ = "0.1.0"

__all__ = ["ABC", "Classification", "mfp", "mup", "ntp", "sp", "table", "spectral", "phase_diagram",
           "TPError", "InvalidParametrizationError", "SymbolicParametrizationError",
           "UnstableParametrizationError", "SpecError", "DivergenceError"]
