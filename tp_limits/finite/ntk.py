"""Finite-network counterparts of the kernel-regime limit (docs/theory.md §5.2).

* :func:`initial_outputs`: f_0 of the width-n network ``train_finite`` would
  train with the same seed, on the kernel points of a routine — to start
  kernel gradient descent exactly where that network starts.
* :func:`empirical_ntk`: the network's tangent kernel in its own
  parametrization's scaling, so that one SGD step changes f by
  -η K χ + O(η²):

      K(ξ, ξ') = Σ_l (lr_W_l / η) ⟨∂f(ξ)/∂W^l, ∂f(ξ')/∂W^l⟩,
      lr_W_l / η = lr_mult_l n^{-(2a_l + c_l)}.

  Each gradient is an outer product g_h^l(ξ) x^{l-1}(ξ)ᵀ, so the inner
  product factorizes: (g_h^l(ξ) · g_h^l(ξ')) (x^{l-1}(ξ) · x^{l-1}(ξ')).  A bias is a
  layer with input 1: its component "b{l}" is (g_h^l(ξ) · g_h^l(ξ')) at the bias's rate
  (docs/theory.md §13).
"""
from __future__ import annotations

import numpy as np

from ..engine.backend import get_backend
from ..engine.options import check_seed
from ..errors import SpecError
from ..spec import MLP, Problem
from ..spec.checks import as_matrix, check_width
from .network import FiniteNetwork


def _network(net: MLP, width: int, seed: int, backend: str) -> FiniteNetwork:
    if not isinstance(net, MLP):
        raise SpecError(f"net must be a tp.MLP, got {type(net).__name__}")
    check_width(width)
    check_seed(seed)
    return FiniteNetwork(net, width, 1.0, seed, get_backend(backend), np.float64)


def _inputs(net: MLP, X, name: str) -> np.ndarray:
    A = as_matrix(X, name)
    if A.shape[1] != net.d_in:
        raise SpecError(f"{name} has {A.shape[1]} columns but the network has d_in = {net.d_in}")
    return A


def initial_outputs(net: MLP, routine, width: int, seed: int = 0, backend: str = "numpy"):
    """f_0 (|Z|, d_out) of the seed's width-n network on ``routine.kernel_points()``."""
    Problem(net, routine)
    nw = _network(net, width, seed, backend)
    Z = nw.b.asarray(routine.kernel_points(), np.float64)
    return nw.b.to_numpy(nw.forward(Z, step=0)[2])


def empirical_ntk(net: MLP, X1, X2=None, width: int = 1024, seed: int = 0,
                  components: bool = False, backend: str = "numpy"):
    """Tangent kernel of the seed's width-n network at initialization.

    Returns (n1, n2) for d_out = 1, else (n1, d_out, n2, d_out); with
    ``components=True`` a dict layer -> that array (layers 1..L+1).
    """
    nw = _network(net, width, seed, backend)
    b, xp = nw.b, nw.b.xp
    X1 = _inputs(net, X1, "X1")
    X2 = X1 if X2 is None else _inputs(net, X2, "X2")
    X = b.asarray(np.vstack([X1, X2]), np.float64)
    hs, xs, _ = nw.forward(X, step=0)
    L, do, n1 = net.L, net.d_out, len(X1)
    const = net.finite_constants(width)              # rates lr_mult_l n^{-(2a_l + c_l)}
    gram = lambda A: A[:n1] @ A[n1:].T  # noqa: E731   (n1, n2) inner products
    eye = xp.eye(do)
    ones = xp.ones((len(X), 1))
    # hidden layers: backpropagate each output separately
    G = [[None] * do for _ in range(L)]
    for o in range(do):
        g_x = nw.alpha * xp.broadcast_to(nw.W[L][o], xs[L].shape)
        for l, g in nw.gradient_factors(hs, g_x):
            G[l][o] = g
    comps = {}
    # the readout's parameters first, then each layer's weight and bias
    params = sorted(nw.program.parameters, key=lambda p: ((p.layer + 1) % (L + 1), p.is_bias))
    for p in params:
        rate, xg = p.constants(const).lr[p.layer], gram(p.input(xs, ones))
        if p.layer == L:                 # ∂f_o/∂W^{L+1} = α e_o x^Lᵀ, ∂f_o/∂b^{L+1} = α e_o
            comps[p.key] = rate * nw.alpha ** 2 * xp.einsum("ij,ab->iajb", xg, eye)
        else:
            comps[p.key] = rate * xp.stack(
                [xp.stack([(G[p.layer][o][:n1] @ G[p.layer][q][n1:].T) * xg for q in range(do)],
                          axis=-1) for o in range(do)], axis=1)
    out = {l: b.to_numpy(v) if do > 1 else b.to_numpy(v)[:, 0, :, 0] for l, v in comps.items()}
    return out if components else sum(out.values())
