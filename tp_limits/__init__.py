"""tp_limits: infinite-width limits of abc-parametrized MLPs (Tensor Programs IV).

* symbolic: :class:`ABC`, presets :func:`sp`, :func:`ntp`, :func:`mfp`,
  :func:`mup`, :func:`table`, :func:`phase_diagram`, :mod:`spectral`;
* problem spec: :class:`MLP`, :class:`Residual`, :class:`Bias`, :class:`Routine`,
  :class:`SGD`, :class:`Adam`, :class:`Muon`, :class:`SpectralUpdate`;
* engines: :func:`simulate_limit` (infinite width; its rarely used knobs grouped in
  :class:`Knobs`), :func:`train_finite` (width n), both -> :class:`Trajectory`;
* analysis: :func:`coord_check`, :func:`convergence`, :func:`dichotomy`,
  :func:`lr_sweep`, :func:`depth_sweep`, :func:`depth_check`;
* data: :mod:`datasets` (real data sets shipped by installed packages);
* Tensor Programs IV's tasks: :mod:`tasks` (Word2Vec and first-order MAML, at width n and
  in their exact limits);
* low-rank adapters: :mod:`adapters` (LoRA's width exponents, and LoRA+'s toy network
  fine-tuned at width n and in its limit);
  :mod:`schedules` (learning-rate schedules for a Routine);
* transformers: :mod:`transformer` (a pre-norm transformer at width n and, for μP under
  SGD, in its infinite-width limit; the attention logits' width exponents).
"""
from . import adapters, datasets, tasks, transformer
from ._version import __version__
from .abc import ABC, Classification, mfp, mup, ntp, sp, spectral, table
from .analysis.convergence import ConvergenceStudy, convergence
from .analysis.coord_check import CoordCheck, coord_check
from .analysis.dichotomy import dichotomy
from .analysis.depth_check import DepthCheck, depth_check
from .analysis.depth_sweep import DepthSweep, depth_sweep
from .analysis.lr_sweep import LRSweep, lr_sweep
from .analysis.phase_diagram import phase_diagram
from .engine.options import Knobs
from .engine.status import Divergence, RunStatus
from .engine.trajectory import Trajectory, Weights
from .errors import (
    BackendUnavailableError,
    DivergenceError,
    InvalidParametrizationError,
    MemoryBudgetError,
    SpecError,
    SymbolicParametrizationError,
    TPError,
    UnstableParametrizationError,
    UnsupportedError,
)
from .finite import empirical_ntk, initial_outputs, train_finite
from .interop import MupTranslation, TorchModel, from_mup, from_torch, to_torch
from .limit import nngp, ntk, simulate_limit
from .spec import (MLP, SGD, Adam, Bias, Muon, Residual, Routine, SpectralUpdate, kernel_points,
                   schedules)

__all__ = [
    "ABC", "Classification", "mfp", "mup", "ntp", "sp", "table", "phase_diagram", "spectral",
    "MLP", "Residual", "Bias", "Routine", "SGD", "Adam", "Muon", "SpectralUpdate", "train_finite",
    "simulate_limit", "nngp", "ntk", "empirical_ntk",
    "initial_outputs", "kernel_points", "Trajectory", "Weights", "RunStatus", "Divergence", "Knobs",
    "from_mup", "MupTranslation", "to_torch", "from_torch", "TorchModel",
    "coord_check", "CoordCheck", "convergence", "ConvergenceStudy", "dichotomy",
    "lr_sweep", "LRSweep", "depth_sweep", "DepthSweep", "depth_check", "DepthCheck", "datasets", "tasks", "adapters", "transformer", "schedules",
    "TPError", "InvalidParametrizationError", "SymbolicParametrizationError",
    "UnstableParametrizationError", "SpecError", "DivergenceError", "MemoryBudgetError",
    "BackendUnavailableError", "UnsupportedError", "__version__",
]
