"""Limit layer: infinite-width training dynamics (NumPy + Numba).

``simulate_limit`` (simulate.py) checks its options (options.py), picks an
engine from the classification (select.py) — ``kernel/`` (kernel gradient descent),
``fused/`` (the fused one-hidden-layer sweep, for the programs it takes), ``montecarlo/``
(any feature-learning program by Monte Carlo) or ``exact/`` (linear networks) — runs it, and turns its typed result (result.py, with the
replicate combination of replicates.py) into a Trajectory.
"""
from .kernel import nngp, ntk
from .simulate import LimitPlan, prepare_limit, simulate_limit

__all__ = ["simulate_limit", "prepare_limit", "LimitPlan", "nngp", "ntk"]
