"""The frozen layers above an adapter on a hidden matrix W^l below W^L (docs/theory.md §16.6).

Fine-tuning freezes every pretrained weight, but the adapter moves h^l, so the matrices
above it see new inputs and carry the adapter's gradient down:

    x^l = φ(h^l),   h^k = W^k x^{k−1} (k = l+1 … L),   f = α_out W^{L+1} x^L;
    δx^L = α_out W^{L+1}ᵀ χ,   δh^k = δx^k φ′(h^k),   δx^{k−1} = W^kᵀ δh^k,   δh^l = δx^l φ′(h^l).

At width n these are matrix products (:class:`FiniteUpper`).  In the limit every product
of a pretrained W^k = ρ W^k_0 − ΔW^k with a new vector is the deep engine's: the hat of
W^k_0 drawn conditional on every product W^k_0 met so far (pretraining's and this
fine-tuning's), its Ż term (Stein's coefficients, which need no knowledge of how the
adapter made the vector), and the ΔW pair sums of the pretraining's steps
(:class:`DeepUpper`, which continues phase one's :class:`~tp_limits.limit.montecarlo.
montecarlo.DeepRun`).  Both take and return coordinates × inputs arrays, and both return
the loss's actual gradient δh^l (the limit's Z^{δh^l} / N), so the adapter's step is one
piece of code (engine.py).
"""
from __future__ import annotations

import numpy as np

from ..engine.backend import numpy_backend
from ..limit.sampling import Draws

_NP = numpy_backend()


class FiniteUpper:
    """The frozen W^{l+1} … W^{L+1} of a width-n network (``W``, their matrices), its φ and
    output multiplier α_out."""

    def __init__(self, W, phi, alpha: float):
        self.W, self.phi, self.alpha = [np.asarray(w, float) for w in W], phi, alpha
        self.hs = None

    def begin(self, rng, rows: int) -> None:
        """A fine-tuning run starts: nothing to reset (the matrices are read only)."""

    def forward(self, v, stored: int) -> np.ndarray:
        """f on each input from h^l = ``v`` (n × inputs); ``stored`` (the first columns, the
        training items) is the deep limit's: a matrix keeps nothing."""
        self.hs = [v]
        for W in self.W[:-1]:
            self.hs.append(W @ self.phi.phi(self.hs[-1], _NP))
        return self.alpha * (self.W[-1] @ self.phi.phi(self.hs[-1], _NP))[0]

    def output(self, v) -> np.ndarray:
        return self.forward(v, 0)

    def backward(self, chi) -> np.ndarray:
        """δh^l (n × rows), the gradient of the loss, for the first len(χ) inputs of the
        last forward pass."""
        rows, dphi = len(chi), self.phi.dphi
        dx = self.alpha * self.W[-1][0][:, None] * chi[None, :]
        for k in range(len(self.hs) - 1, 0, -1):
            dx = self.W[k - 1].T @ (dx * dphi(self.hs[k][:, :rows], _NP))
        return dx * dphi(self.hs[0][:, :rows], _NP)


class DeepUpper:
    """The deep Monte Carlo run ``run`` of a pretraining, continued frozen above W^l.

    The run's steps are over: every product uses the final weights W_T (ρ_T and the
    pairs' coefficients C[T, s]), and no pair is added.  The hat families of W^{l+1} … W^L
    keep growing: a new vector's hat is conditional on every stored one."""

    def __init__(self, run, l: int):
        self.run, self.l, self.T = run, l, run.spec.problem.T
        self.families = [fam for k in range(l + 1, run.L + 1) for fam in (run.F[k], run.G[k])]
        self.sizes = [fam.k for fam in self.families]
        self.hs = None

    def begin(self, rng, rows: int) -> None:
        """A fine-tuning run from the pretrained state: the families forget what an earlier
        run on the same base stored and make room for ``rows`` more rows each, and the
        hats come from ``rng`` (a run is then the same whatever ran on the base before)."""
        for fam, k in zip(self.families, self.sizes):
            fam.truncate(k)
            fam.reserve(k + rows)
        run = self.run
        run.draws = Draws(run.b, rng, run.spec.random)

    def forward(self, v, stored: int) -> np.ndarray:
        """f̊ on each input from the particles' h^l = ``v`` (N × inputs); the first
        ``stored`` inputs are training items, whose vectors the families keep."""
        run = self.run
        h = run.xp.asarray(np.ascontiguousarray(v.T))                  # rows: (inputs, N)
        self.hs = run.forward_above(self.l, h, stored, self.T)
        xL = run.phi.phi(self.hs[-1], run.b)
        return run.b.to_numpy(run.alpha * (xL @ run.ZV[:, 0]) / run.N)

    def output(self, v) -> np.ndarray:
        return self.forward(v, 0)

    def backward(self, chi) -> np.ndarray:
        """δh^l = Z^{δh^l} / N (N × rows) for the stored inputs of the last forward pass."""
        run = self.run
        dv = run.backward_above(self.l, self.hs, run.xp.asarray(chi)[:, None], self.T)
        return np.ascontiguousarray(run.b.to_numpy(dv).T) / run.N
