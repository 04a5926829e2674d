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
from ...spec.program import Layer, Program
from .pair_moments import moments, pairwise


class _KernelOps:
    """The walk's operations on kernel matrices over input pairs (spec/program.py,
    ``representation = "kernel"``): forward a pre-activation is its covariance Σ^l, an
    activation the pair moments V^l (V̇^l kept for the way back); backward a vector is its
    gradient kernel Π^l.  Skips add independent Gaussians (Σ^{s} + c² Σ) and hand Π back
    unchanged; a branch scales Π by c²."""

    representation = "kernel"

    def __init__(self, phi: str, sigma, bias_sigma, J):
        self.fn, self.sigma, self.J = moments(phi), sigma, J
        self.sb2 = [s * s for s in bias_sigma]
        self.V, self.Vd, self.grads = [], [], {}

    def product(self, l, x):
        """σ_1² X Xᵀ for the inputs X (l = 0); σ_{l+1}² V^l for a layer's input kernel."""
        if l == 0:
            return self.sigma[0] ** 2 * x @ x.T
        return self.sigma[l] ** 2 * x

    def add_bias(self, l, v):
        return v + self.sb2[l] * self.J

    def residual(self, h_skip, c, v):
        return c * c * v + h_skip

    def pre_activation(self, l, h):
        return h

    def activation(self, l, n):
        V, Vd = pairwise(n, self.fn)
        self.V.append(V)
        self.Vd.append(Vd)
        return V

    def identity(self, l, n):
        self.V.append(n)                          # x = N(h): its kernel, with φ′ = 1
        self.Vd.append(np.ones_like(n))
        return n

    def readout(self, x):
        return self.sigma[-1] ** 2 * x

    def finish_output(self, f):
        return f

    def scale(self, c, g):
        return c * c * g

    def product_T(self, l, g):
        return self.sigma[l] ** 2 * g

    def activation_backward(self, l, n, dx):
        return dx * self.Vd[l]

    def identity_backward(self, l, n, dx):
        return dx

    def gradient(self, l, g) -> None:
        self.grads[l] = g

    bias_gradient = gradient


def layer_kernels(phi: str, sigma, X1, X2=None, program=None, bias_sigma=()) -> dict:
    """V^l, V̇^l (l = 1..L) and the contributions K_1..K_{L+1} between X1 and X2.

    ``sigma`` holds the L+1 effective init constants.  Cross kernels are
    computed on the stacked inputs and cut out, so the pair moments see the
    right variances; without X2 the kernels of X1 are exactly symmetric.
    ``program`` (spec/program.py; default: the plain MLP of len(sigma) layers) is walked
    once forward and once backward on kernel matrices (:class:`_KernelOps`): a residual
    block's skip adds the kernel of the layer it starts from, Σ^l = Σ^{s_l} + c_l² σ_l²
    V^{l-1}, and hands its gradient kernel back to it, Π^{s_l} += Π^l; a layer's
    contribution is c_l² Π^l ⊙ V^{l-1} (docs/theory.md §12.3); a normalization rescales
    each input's covariance before φ and the gradient kernels after it (§14.3).
    ``bias_sigma`` (σ_b of the hidden biases, then the readout's 0) adds σ_{b,l}² to Σ^l
    (inside a block's branch, times c_l²); the biases' contributions "Kb" are c_l² Π^l for
    the hidden ones and J for the readout's.
    """
    if X2 is None:
        X, cut = X1, (lambda M: M)
    else:
        X, n1 = np.vstack([X1, X2]), len(X1)
        cut = lambda M: M[:n1, n1:]  # noqa: E731
    L = len(sigma) - 1
    if program is None:
        program = Program(tuple(Layer(l) for l in range(L + 1)))
    J = np.ones((len(X), len(X)))
    ops = _KernelOps(phi, sigma, tuple(bias_sigma) + (0.0,), J)
    hs, xs = program.forward(X, ops)
    nngp = program.output(xs[-1], ops)
    program.readout_gradient(1.0, ops)
    program.backward(hs, sigma[L] ** 2, ops)
    grams = [X @ X.T] + ops.V              # each weight's input kernel (a bias's: J)
    K = [ops.grads[l] * grams[l] for l in range(L + 1)]
    Kb = [ops.grads[l] for l in range(L)] + [J]
    comps = {p.key: cut((Kb if p.is_bias else K)[p.layer]) for p in program.parameters}
    return {"V": [cut(v) for v in ops.V], "Vdot": [cut(v) for v in ops.Vd],
            "K": [cut(k) for k in K], "Kb": [cut(k) for k in Kb], "nngp": cut(nngp),
            "components": comps}


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
    return layer_kernels(net.phi, net.limit_sigma, A, B, net.program, net.bias_sigmas)


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
        layers = tuple(layers) + biases_moving_with(net, layers)
    layers = tuple(layers)
    params = {p.key: p for p in net.program.parameters}
    names = [key for key in params if isinstance(key, str)]
    if not layers or any(l not in names if isinstance(l, str) else
                         (not isinstance(l, numbers.Integral) or not 1 <= l <= net.L + 1)
                         for l in layers):
        raise SpecError(f"layers = {layers!r} must name layers in 1..{net.L + 1}"
                        + (f" or biases {', '.join(names)}" if names else ""))
    lk = _layer_kernels(net, A, B)
    a2 = net.output_multiplier ** 2
    comps = {l: a2 * (net.rate_multiplier(params[l]) * lk["components"][l]) for l in layers}
    return comps if components else sum(comps.values())


def biases_moving_with(net, layers) -> tuple:
    """The biases that move with the given weight layers: the hidden ones with the input
    layer (the same width exponents), the readout's always (it has no width)."""
    return tuple(p.key for p in net.program.parameters
                 if p.is_bias and (p.layer == net.L or 1 in layers))
