"""LayerNorm as a layer kind: N(h) = (h − mean h)/√(var h + ε) over the width, before φ,
without gains (docs/theory.md §14.3).

A normalization has no parameter: it is an average (Avg) and a coordinatewise function
(Nonlin) of the Tensor Program, so its infinite-width limit replaces each average over the
width by an expectation,

    N(Z) = (Z − E Z)/s,   s = √(Var Z + ε),

and its backward pass, δh = (δn − mean δn − y · mean(δn y))/s with y = N(h), becomes

    Z^{δh} = (Z^{δn} − E Z^{δn} − Z^y E[Z^{δn} Z^y])/s:

the same arithmetic with the width's averages replaced by expectations.  ε is width-free.
With Θ(1) pre-activations at initialization s = Θ(1), so N changes no width exponent: the
classification of the parametrization stands (§14.4); :meth:`LayerNorm.width_refusal`
refuses the others.

One kind, four representations of a width-n vector (spec/program.py):

* ``rows``: arrays whose last axis is the width (a finite network) or the particles (the
  Monte Carlo limit): both average over that axis;
* ``coefficients``: a linear combination of zero-mean Gaussian primitives (the exact
  linear limit, φ = id): E Z = 0, Var Z its covariance, so N is a deterministic rescaling
  and stays linear;
* ``kernel``: the covariance matrix of a pre-activation over input pairs at
  initialization (NNGP/NTK): each input's coordinates are iid N(0, Σ(ξ, ξ)), so
  N rescales entry (ξ, ξ') by 1/(s(ξ) s(ξ')), forward and, for gradient kernels, backward
  (the mean terms of the backward pass are O(1/n) there);
* ``torch``: the exported module (torch.nn.functional.layer_norm).

:class:`~.rmsnorm.RMSNorm` is the same without centering.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import finite_positive


@dataclass(frozen=True)
class LayerNorm:
    """N(h) = (h − mean h)/√(var h + ``eps``) over the width (see the module docstring)."""

    eps: float = 1e-5
    name = "layer"
    center = True

    def __post_init__(self):
        object.__setattr__(self, "eps", finite_positive(self.eps, "norm_eps"))

    # -- the walk's entry points ------------------------------------------------------------
    def forward(self, representation: str, h, ops):
        return getattr(self, representation)(h, ops)

    def backward(self, representation: str, h, g, ops):
        """δh from δn = ``g`` (the gradient at N(h)), for the pre-activation ``h``."""
        return getattr(self, representation + "_backward")(h, g, ops)

    def refusal(self, representation: str) -> str | None:
        return None

    # -- the classifier ----------------------------------------------------------------------
    @staticmethod
    def width_refusal(classification) -> str | None:
        """Why N would change the width exponents of this parametrization (None: it keeps
        them all, docs/theory.md §14.4): its pre-activations are not Θ(1) at
        initialization, so s carries a power of n into every vector."""
        failed = [c for c in classification.conditions
                  if c.key in ("input_init", "hidden_init") and not c.holds]
        if not failed:
            return None
        return ("its pre-activations are not Θ(1) at initialization ("
                + "; ".join(c.consequence for c in failed) + "), where a normalization's "
                "scale would change the width exponents; normalizations are derived for "
                "a_1 + b_1 = 0 and a_l + b_l = 1/2 (docs/theory.md §14.4)")

    # -- rows: average over the last axis (width or particles) ----------------------------
    def _rows_parts(self, h, xp):
        c = h - xp.mean(h, axis=-1, keepdims=True) if self.center else h
        s = xp.sqrt(xp.mean(c * c, axis=-1, keepdims=True) + self.eps)
        return c / s, s

    def rows(self, h, ops):
        return self._rows_parts(h, ops.xp)[0]

    def rows_backward(self, h, g, ops):
        xp = ops.xp
        y, s = self._rows_parts(h, xp)
        out = g - y * xp.mean(g * y, axis=-1, keepdims=True)
        if self.center:
            out = out - xp.mean(g, axis=-1, keepdims=True)
        return out / s

    # -- coefficients over zero-mean Gaussian primitives (E Z = 0) --------------------------
    def coefficients(self, h, ops):
        return h / np.sqrt(ops.cov(h, h) + self.eps)

    def coefficients_backward(self, h, g, ops):
        s = np.sqrt(ops.cov(h, h) + self.eps)
        y = h / s
        return (g - y * ops.cov(g, y)) / s

    # -- kernels at initialization (E Z = 0) ---------------------------------------------
    def _kernel_scale(self, S):
        d = np.sqrt(np.diag(S) + self.eps)
        return np.outer(d, d)

    def kernel(self, S, ops):
        return S / self._kernel_scale(S)

    def kernel_backward(self, S, G, ops):
        return G / self._kernel_scale(S)

    # -- the exported torch module ----------------------------------------------------------
    def torch(self, h, ops):
        import torch.nn.functional as F
        return F.layer_norm(h, h.shape[-1:], eps=self.eps)

    def to_json(self) -> dict:
        return {"norm": self.name, "norm_eps": self.eps}
