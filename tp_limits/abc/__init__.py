"""Symbolic layer: abc-parametrizations and their exact classification.

Imports nothing numeric (SymPy and the standard library only).
"""
from . import spectral
from .classify import Classification, Condition, LimitSwitches, classify
from .parametrization import ABC
from .predictions import predicted_exponents
from .presets import mfp, mup, ntp, sp
from .table import Table, table

__all__ = ["ABC", "Classification", "Condition", "LimitSwitches", "classify",
           "predicted_exponents", "mfp", "mup", "ntp", "sp", "Table", "table", "spectral"]
