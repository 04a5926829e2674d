"""Per-particle optimizer state of the one-hidden-layer limit (docs/theory.md §10).

Z^U and Z^{nV} are particle-local, so every optimizer is a particle system:
plain SGD needs no state, heavy ball with decay one buffer per coordinate,
Adam two moments.  The sweep (sweep.py, and its NumPy twin) receives the
state as ``SU`` (k, d, N), ``SV`` (k, d_out, N) and the hyperparameters as one
float64 array ``hp`` laid out as :data:`HP`.
"""
from __future__ import annotations

import numpy as np

#: Layout of the optimizer hyperparameters ``hp`` (float64) passed to the sweep.
HP = ("momentum", "decay_u", "decay_v", "beta1", "beta2", "eps", "bias1", "bias2", "lr_u",
      "lr_v")


def hyperparameters(**values) -> np.ndarray:
    """The ``hp`` array of the sweep from named values (missing ones are 0; bias1 and
    bias2, Adam's 1 − β^t corrections, default to 1)."""
    hp = np.zeros(len(HP))
    hp[HP.index("bias1")] = hp[HP.index("bias2")] = 1.0
    for k, v in values.items():
        hp[HP.index(k)] = v
    return hp


def state_rows(optimizer) -> int:
    """k: arrays of state per particle coordinate (0 plain SGD, 1 heavy ball, 2 Adam)."""
    if optimizer.kind == "adam":
        return 2
    return 0 if optimizer.plain else 1


class ParticleOptimizer:
    """The state arrays and, per step, the sweep's (step_u, step_v, hp).

    SGD (plain or heavy ball): step = α η_l e_l, the increment of plain SGD.
    Adam: step = α (the sweep forms the gradient ĝ = α Σ_i ..., in the units of
    the width-free ε, docs/theory.md §10.3) and lr = η_l e_l; bias corrections
    1 − β^t for the t-th update.
    """

    def __init__(self, optimizer, const, d: int, d_out: int, N: int, dtype, zeros=np.zeros):
        """``zeros(shape, dtype)`` makes the state arrays (the backend's, on cache lines)."""
        self.opt, self.const = optimizer, const
        k = state_rows(optimizer)
        self.SU = zeros((k, d, N if k else 1), dtype)
        self.SV = zeros((k, d_out, N if k else 1), dtype)
        self.decay = optimizer.shrinks(const.decay)

    def step(self, t: int):
        """(step_u, step_v, hp) for the t-th update (t = 1, 2, ...)."""
        c, o = self.const, self.opt
        a = c.alpha
        if o.kind != "adam":
            return a * c.eta[0], a * c.eta[1], hyperparameters(
                momentum=o.momentum, decay_u=self.decay[0], decay_v=self.decay[1])
        b1, b2 = o.betas
        return a, a, hyperparameters(
            decay_u=self.decay[0], decay_v=self.decay[1], beta1=b1, beta2=b2, eps=o.eps,
            bias1=1 - b1 ** t, bias2=1 - b2 ** t, lr_u=c.eta[0], lr_v=c.eta[1])
