"""The problem description shared by every engine (docs/theory.md §0).

* :class:`MLP` — the network, with the one conversion of exponents into
  per-layer numbers (:meth:`MLP.finite_constants`, :meth:`MLP.limit_constants`);
* :class:`Residual` — skip connections and their depth exponents (residual.py);
* :class:`Bias` — biases, each a weight with input 1 (bias.py);
* :class:`Routine` — the training data, batch size, steps, learning rate, loss;
* :class:`SGD`, :class:`Adam`, :class:`Muon`, :class:`SpectralUpdate` — the optimizers (optimizers/, one module each) and their
  width-free hyperparameters;
* :class:`Problem` — an MLP on a Routine, as the engines read it;
* :mod:`schedules` — learning-rate schedules (a Routine's rate per step).

All are frozen and validated on construction, so an engine never starts on
inconsistent input.
"""
from .bias import Bias
from .mlp import MLP, FiniteConstants, LimitConstants
from .optimizers import SGD, Adam, Muon, Optimizer, SpectralUpdate
from .problem import Problem
from .residual import Residual
from . import schedules
from .routine import Routine, distinct_rows, kernel_points

__all__ = ["MLP", "Residual", "Bias", "Routine", "Problem", "FiniteConstants", "LimitConstants",
           "distinct_rows", "kernel_points", "SGD", "Adam", "Muon", "SpectralUpdate", "Optimizer",
           "schedules"]
