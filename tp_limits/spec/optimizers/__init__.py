"""The optimizer half of a training routine: one module per optimizer (docs/theory.md §10).

The parametrization's ``optimizer`` field names the width exponents; these objects
hold the width-free hyperparameters and everything the engines ask of an optimizer
(the protocol of base.py), stated once and read by the finite and the limit
engines alike:

* :class:`SGD` (sgd.py) — heavy-ball momentum and coupled weight decay;
* :class:`Adam` (adam.py) — bias-corrected Adam with decoupled (AdamW) decay;
* :class:`Muon` (muon.py) — momentum, then the matrix sign of the update;
* :class:`SpectralUpdate` (spectral_update.py) — any of them through a spectral transform
  (msign, spectral normalization, singular-value clipping: transforms.py).

A new optimizer is one more module filling :class:`~.base.Optimizer`, listed in
:data:`OPTIMIZERS` below.
"""
from __future__ import annotations

from ...errors import SpecError
from .adam import Adam
from .base import CoordinateRule, Optimizer, hyperparameters
from .muon import Muon
from .sgd import SGD
from .spectral_update import SpectralUpdate

#: name -> class, for routines and experiment files
OPTIMIZERS = {cls.name: cls for cls in (SGD, Adam, Muon)}


def default_optimizer(kind: str) -> Optimizer:
    """The optimizer a parametrization's ``optimizer`` field means when none is given: the
    first registered optimizer that follows those exponents, with its defaults."""
    return next(opt for cls in OPTIMIZERS.values()
                if (opt := cls.for_exponents(kind)) is not None)


def check_optimizer(optimizer, param_kind: str) -> Optimizer:
    """``optimizer`` (None: the default for ``param_kind``) checked against the
    parametrization, whose exponents assume one kind of optimizer."""
    if optimizer is None:
        return default_optimizer(param_kind)
    if not isinstance(optimizer, Optimizer):
        raise SpecError(f"optimizer must be one of {names()}, got {optimizer!r}")
    if optimizer.exponents != param_kind:
        raise SpecError(
            f"the routine's optimizer is {optimizer.exponents} but the parametrization's "
            f"exponents are for {param_kind}: build the parametrization with optimizer="
            f"{optimizer.exponents!r} (e.g. tp.mup(L, optimizer={optimizer.exponents!r})) "
            "so that both agree")
    return optimizer


def names() -> str:
    """'tp.SGD(...), tp.Adam(...)': how the optimizers are spelled, for messages."""
    return ", ".join(f"tp.{cls.__name__}(...)" for cls in OPTIMIZERS.values())


__all__ = ["SGD", "Adam", "Muon", "SpectralUpdate", "Optimizer", "CoordinateRule", "OPTIMIZERS",
           "check_optimizer", "default_optimizer", "hyperparameters", "names"]
