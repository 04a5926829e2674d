"""How the initial weight matrices are drawn: one place for every engine (docs/theory.md §11.6).

Every scheme starts from the parametrization's Gaussian W^l_0 = σ_l s n^{-(a_l+b_l)} G^l
(G^l iid N(0, 1), drawn on the host in layer order) and changes only constants, never
exponents:

* ``"gaussian"`` — W^l_0 as drawn (the default);
* ``"spectral"`` — W^l_0 rescaled to the spectral norm σ_l s κ_l n^{½ − (a_l+b_l)}, the
  Gaussian's own width exponent with the spectral condition's constant κ_l, the width-free
  part of √(fan_out/fan_in) (1/√d, 1, √d_out): for μP, ‖W^l_0‖_* = σ_l √(fan_out/fan_in)
  exactly.  The factor κ_l √n / ‖G^l‖_* tends to κ_l for a thin layer (‖G‖_* ≈ √n + √d)
  and to ½ for a hidden n × n one (‖G‖_* ≈ 2√n), so in the limit this is the Gaussian
  initialization with σ_l multiplied by those constants;
* ``"orthogonal"`` — the same spectral norm with every singular value equal: W^l_0 =
  σ_l s κ_l n^{½ − (a_l+b_l)} msign(G^l), a Haar-random (semi-)orthogonal matrix.  A thin
  layer's rows are then asymptotically iid Gaussian (√n msign(G) ≈ G for an n × d G), so
  with one hidden layer the limit is the Gaussian one with σ_l κ_l.  A hidden n × n
  W_0 has W_0ᵀ W_0 ∝ I: the backward pass returns W_0ᵀ W_0 x exactly, with no independent
  Gaussian part Ẑ, and the Gaussian Tensor Program of docs/theory.md §4.1 does not
  describe it, so the limit engines refuse it for L >= 2.

Spectral norms come from the ``norm`` the finite network passes (exact for thin
matrices, Lanczos for square ones, finite/norms.py).
"""
from __future__ import annotations

import math

import numpy as np

INITS = ("gaussian", "spectral", "orthogonal")


def shape_factor(l: int, layers: int, shape) -> float:
    """κ_l: the width-free part of √(fan_out/fan_in) — 1/√d (input layer), 1 (hidden),
    √d_out (readout) — for layer ``l`` (0-based) of ``layers`` with W of ``shape``."""
    if l == 0:
        return shape[1] ** -0.5
    if l == layers - 1:
        return shape[0] ** 0.5
    return 1.0


def finite_matrix(init: str, G: np.ndarray, l: int, layers: int, width: int, norm) -> np.ndarray:
    """The unit-scale draw G (host float64, iid N(0, 1), layer ``l`` of ``layers``) reshaped by
    ``init``: returned as is, rescaled by κ_l √n / ‖G‖_*, or replaced by κ_l √n msign(G).
    The caller multiplies by σ_l s n^{-(a_l+b_l)} afterwards."""
    if init == "gaussian":
        return G
    target = shape_factor(l, layers, G.shape) * math.sqrt(width)
    if init == "spectral":
        G *= target / norm(G)
        return G
    Q = _polar(G)
    Q *= target
    return Q


def _polar(G: np.ndarray) -> np.ndarray:
    """msign(G) = U Vᵀ.  Thin G through its small Gram, G (GᵀG)^{-1/2}; a square G through
    QR with the signs of R's diagonal moved into Q, which has the same (Haar) law as the
    polar factor of a Gaussian at a fraction of an SVD's cost."""
    m, k = G.shape
    if m != k:
        tall = m > k
        A = G if tall else G.T
        w, V = np.linalg.eigh(A.T @ A)
        Q = A @ ((V / np.sqrt(w)) @ V.T)
        return Q if tall else Q.T
    Q, R = np.linalg.qr(G)
    Q *= np.sign(np.diag(R))
    return Q


def limit_factors(init: str, L: int, d_in: int, d_out: int) -> tuple:
    """The constants by which ``init`` multiplies σ_l in the limit (layers 1..L+1): 1 for
    "gaussian"; κ_l for thin layers and ½ for hidden ones under "spectral"; κ_l for thin
    layers under "orthogonal" (whose hidden layers have no Gaussian limit)."""
    if init == "gaussian":
        return (1.0,) * (L + 1)
    hidden = 0.5 if init == "spectral" else 1.0
    return (d_in ** -0.5,) + (hidden,) * (L - 1) + (d_out ** 0.5,)


def limit_refusal(init: str, L: int) -> str | None:
    """Why the limit engines cannot run ``init`` with L hidden layers (None if they can)."""
    if init == "orthogonal" and L >= 2:
        return ("init='orthogonal' has no Gaussian infinite-width limit with hidden n x n "
                "matrices: W_0ᵀ W_0 ∝ I, so the backward pass through W_0ᵀ returns W_0ᵀ W_0 x "
                "exactly, with no independent Gaussian part Ẑ (docs/theory.md §11.6); finite "
                "networks accept it, and init='spectral' is its limit-ready counterpart")
    return None


def host_bytes(init: str, shape) -> int:
    """Extra host bytes the scheme needs while drawing a matrix of ``shape`` (float64)."""
    if init == "orthogonal":
        m, k = shape
        return 8 * (2 * m * k if m == k else 2 * max(m, k) * min(m, k) + 3 * min(m, k) ** 2)
    return 0
