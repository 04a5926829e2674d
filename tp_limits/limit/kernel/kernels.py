"""NNGP and NTK kernels of an MLP with per-layer constants (docs/theory.md §5.3).

For inputs X (rows), with σ_l the effective init constants:

    Σ^1 = σ_1² X Xᵀ
    V^l = E[φ(u) φ(v)],  V̇^l = E[φ′(u) φ′(v)],  (u, v) ~ N(0, Σ^l on the pair),  l = 1..L
    Σ^{l+1} = σ_{l+1}² V^l
    Π^L = σ_{L+1}² V̇^L,   Π^{l-1} = σ_l² Π^l ⊙ V̇^{l-1}
    K_1 = Π^1 ⊙ X Xᵀ,   K_l = Π^l ⊙ V^{l-1} (2 <= l <= L),   K_{L+1} = V^L.

With the output multiplier α and per-layer learning-rate multipliers η_l/η,
the NNGP (covariance of f_0 for p = 1/2) is α² σ_{L+1}² V^L and the kernel of
layer l in kernel gradient descent is α² (η_l/η) K_l; outputs are independent
(⊗ I_{d_out}).

With biases (docs/theory.md §13) each pre-activation adds its bias's variance,
Σ^1 = σ_1² X Xᵀ + σ_{b,1}² J and Σ^{l+1} = σ_{l+1}² V^l + σ_{b,l+1}² J (J = all ones), and
each bias is a layer whose input is 1: K_{b,l} = Π^l (K_1 with X Xᵀ replaced by J), and
K_{b,L+1} = J for the readout's.

The pair moments V, V̇ come from pair_moments.py (closed forms or quadrature).
"""
from __future__ import annotations

import numbers

import numpy as np

from ...errors import SpecError, UnstableParametrizationError, UnsupportedError
from ...spec import MLP
from ...spec.checks import as_matrix
from ...spec.residual import Carried
from .pair_moments import moments


def _pairwise(S, fn):
    """(V, V̇) matrices of the pair moments for the covariance matrix S: computed on the
    pairs i <= j and mirrored, so both are exactly symmetric."""
    i, j = np.triu_indices(len(S))
    diag = np.diag(S)
    out = []
    for m in fn(diag[i], diag[j], S[i, j]):
        M = np.empty_like(S)
        M[i, j] = m
        M[j, i] = m
        out.append(M)
    return out


def layer_kernels(phi: str, sigma, X1, X2=None, branch=(), skip=(), bias_sigma=()) -> dict:
    """V^l, V̇^l (l = 1..L) and the contributions K_1..K_{L+1} between X1 and X2.

    ``sigma`` holds the L+1 effective init constants.  Cross kernels are
    computed on the stacked inputs and cut out, so the pair moments see the
    right variances; without X2 the kernels of X1 are exactly symmetric.
    ``branch`` and ``skip`` (a residual network's multipliers c_l and skip sources s_l,
    docs/theory.md §12.3): a skip adds the kernel of the layer it starts from,
    Σ^l = Σ^{s_l} + c_l² σ_l² V^{l-1}, and hands its gradient kernel back to it,
    Π^{s_l} += Π^l; a layer's contribution is c_l² Π^l ⊙ V^{l-1}.  ``bias_sigma`` (the L
    hidden biases' σ_b, or () without biases) adds σ_{b,l}² to Σ^l (inside a block's
    branch, times c_l²) and returns the biases' contributions "Kb": c_l² Π^l for the
    hidden ones, J for the readout's.
    """
    if X2 is None:
        X, cut = X1, (lambda M: M)
    else:
        X, n1 = np.vstack([X1, X2]), len(X1)
        cut = lambda M: M[:n1, n1:]  # noqa: E731
    L = len(sigma) - 1
    fn = moments(phi)
    J = np.ones((len(X), len(X)))
    sb2 = [s * s for s in bias_sigma] if len(bias_sigma) else [0.0] * L
    S = sigma[0] ** 2 * X @ X.T + sb2[0] * J
    Vs, Vds = [], []
    c2 = [b * b for b in branch] if branch else [1.0] * (L + 1)
    skip = skip or (-1,) * (L + 1)
    Ss = [S]
    for l in range(L):
        V, Vd = _pairwise(Ss[l], fn)
        Vs.append(V)
        Vds.append(Vd)
        if l < L - 1:                          # the next hidden layer (a skip adds Σ^{s})
            S = c2[l + 1] * (sigma[l + 1] ** 2 * V + sb2[l + 1] * J)
            Ss.append(S + Ss[skip[l + 1]] if skip[l + 1] >= 0 else S)
    Pi = [None] * L
    Pi[L - 1] = sigma[L] ** 2 * Vds[L - 1]
    carried = Carried()                        # gradient kernels handed back by skips
    for l in range(L - 1, 0, -1):
        if skip[l] >= 0:
            carried.hand(skip[l], Pi[l])
        Pi[l - 1] = carried.receive(l - 1, c2[l] * sigma[l] ** 2 * Pi[l] * Vds[l - 1])
    K = ([Pi[0] * (X @ X.T)] + [c2[l] * Pi[l] * Vs[l - 1] for l in range(1, L)]
         + [Vs[L - 1]])
    Kb = [c2[l] * Pi[l] for l in range(L)] + [J]
    return {"V": [cut(v) for v in Vs], "Vdot": [cut(v) for v in Vds],
            "K": [cut(k) for k in K], "Kb": [cut(k) for k in Kb],
            "nngp": sigma[L] ** 2 * cut(Vs[L - 1])}


def _inputs(net, X1, X2):
    """The two input sets as float matrices of the network's input dimension."""
    if not isinstance(net, MLP):
        raise SpecError(f"net must be a tp.MLP, got {type(net).__name__}")
    refusal = net.limit_refusal()
    if refusal:
        raise UnsupportedError(refusal)
    out = []
    for name, X in (("X1", X1), ("X2", X2)):
        if X is None:
            out.append(None)
            continue
        A = as_matrix(X, name)
        if A.shape[1] != net.d_in:
            raise SpecError(f"{name} has {A.shape[1]} columns but the network has "
                            f"d_in = {net.d_in}")
        out.append(A)
    return out


def nngp(net, X1, X2=None) -> np.ndarray:
    """Covariance of f_0 in the limit when p = 1/2: α² σ_{L+1}² V^L(X1, X2) (per output)."""
    A, B = _inputs(net, X1, X2)
    return net.output_multiplier ** 2 * _layer_kernels(net, A, B)["nngp"]


def _layer_kernels(net, A, B) -> dict:
    bias = () if net.bias is None else net.bias.sigmas(net.L)
    return layer_kernels(net.phi, net.limit_sigma, A, B, net.branch, net.skips, bias)


def ntk(net, X1, X2=None, components: bool = False, layers=None):
    """The limiting kernel of ``net``'s parametrization (docs/theory.md §5.2).

    K = α² Σ_{l in layers} (η_l/η) K_l, where ``layers`` defaults to the
    classification's ``kernel_components`` (NTP: all; SP with LR 1/n: no input
    layer; ...), or to every layer (the full NTK) when the parametrization is
    not in the kernel regime.  ``components=True`` returns {l: α² (η_l/η) K_l}.  With
    biases (docs/theory.md §13) the components "b1" … "b{L}" (α² (η_{b,l}/η) K_{b,l}) come
    with the input layer's, whose width exponents they share, and "b{L+1}" (the readout's
    bias, width-free) always; ``layers`` may name them.
    """
    A, B = _inputs(net, X1, X2)
    k = net.param.classify()
    if layers is None:
        if k.regime == "unstable":
            raise UnstableParametrizationError(
                f"{net.param.label} is unstable, so it has no limiting kernel: "
                + "; ".join(k.violations) + ". Pass layers=(1, ..., L+1) for the full NTK "
                "of its architecture")
        layers = k.kernel_components or tuple(range(1, net.L + 2))
        layers = tuple(layers) + _bias_components(net, layers)
    layers = tuple(layers)
    names = _bias_names(net)
    if not layers or any(l not in names if isinstance(l, str) else
                         (not isinstance(l, numbers.Integral) or not 1 <= l <= net.L + 1)
                         for l in layers):
        raise SpecError(f"layers = {layers!r} must name layers in 1..{net.L + 1}"
                        + (f" or biases {', '.join(names)}" if names else ""))
    lk = _layer_kernels(net, A, B)
    a2 = net.output_multiplier ** 2
    comps = {l: a2 * (net.bias_lr_mult[names.index(l)] * lk["Kb"][names.index(l)]
                      if isinstance(l, str) else net.effective_lr_mult[l - 1] * lk["K"][l - 1])
             for l in layers}
    return comps if components else sum(comps.values())


def _bias_names(net) -> list:
    """"b1" … "b{L+1}" for a network with biases (the readout's only if it has one)."""
    if net.bias is None:
        return []
    return [f"b{l}" for l in range(1, net.L + 1)] + ([f"b{net.L + 1}"] if net.bias.readout
                                                     else [])


def _bias_components(net, layers) -> tuple:
    """The biases that move with the given weight layers: the hidden ones with the input
    layer (the same width exponents), the readout's always (it has no width)."""
    names = _bias_names(net)
    hidden = tuple(names[:net.L]) if 1 in layers else ()
    return hidden + tuple(names[net.L:])
