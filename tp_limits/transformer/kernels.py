"""The kernels of a transformer with 1/d attention at infinite width: the NNGP and the
tangent kernel at initialization (docs/theory.md §17.6).

At initialization W_Q and W_K are independent, so the 1/d logits ℓ = c q·k/d_head are
Θ(n^{−½}) and vanish: every head attends uniformly over its keys (s' ≤ s when causal), a
fixed mixing matrix M.  The queries' and keys' gradients are smaller than the other
matrices' by n^{−½} (∂ℓ carries the 1/d), so their share of the tangent kernel vanishes too.
What remains is a network of Gaussian matrices, LayerNorms and a fixed linear mixing
across positions, whose kernels follow by the recursion of docs/theory.md §5.3 over the
rows r = (sequence, position):

    forward   Σ_0 = σ² ([ξ_r = ξ_r'] + [s_r = s_r'])       (words, positions)
              N:  Σ ↦ Σ_rr' / (q_r q_r'),  q_r = √(Σ_rr + ε)
              attention: Σ ← Σ + β² σ⁴ M N(Σ) Mᵀ;   MLP: Σ ← Σ + β² σ² E[φ(u_r) φ(u_r')],
              u ~ N(0, σ² N(Σ));   NNGP = σ_out² N(Σ_K)
    backward  Π^{(a)} at the final norm: the readout's vector at row a only; through a
              norm Π/(q q), through W ᵀ σ² Π, through φ′ Π ⊙ E[φ′φ′], through the mixing
              Mᵀ Π M, a branch β² Π added to the skip's

and each parameter's share is Σ over the rows of its input's kernel times its output's Π:

    K_W(a, b) = σ_out² Σ_{r, r'} Π_W(a, r; b, r') Σ_x(r, r'),    K_out(a, b) = N(Σ_K)(a, b).

μP (under SGD) and the NTK parametrization have the *same* kernel at initialization: their
rates differ by exactly the factors their readouts' scales give the backward pass.  Kernels
are per output word and equal for every word (⊗ I_V).
"""
from __future__ import annotations

import numpy as np

from ..engine.memory import require_memory
from ..errors import UnsupportedError
from ..limit.kernel.pair_moments import moments, pairwise
from .model import Transformer


def mixing_matrix(S: int, causal: bool) -> np.ndarray:
    """M (S, S): uniform attention over the keys, s' ≤ s when ``causal``."""
    if not causal:
        return np.full((S, S), 1.0 / S)
    M = np.tril(np.ones((S, S)))
    return M / M.sum(axis=1, keepdims=True)


class _Rows:
    """The rows r = b S + s of tokens (B, S), and the gather of a row-pair matrix into the
    layout of the backward pass, (a, s, b, s'): output row a, row s of a's sequence."""

    def __init__(self, tokens):
        self.B, self.S = tokens.shape
        self.seq = np.repeat(np.arange(self.B), self.S)
        self.pos = np.tile(np.arange(self.S), self.B)

    def pairs(self, X):
        return X.reshape(self.B, self.S, self.B, self.S)[self.seq][:, :, self.seq]

    def scale(self, x):
        """The outer product of the per-row factors x, in the backward layout."""
        xs = x.reshape(self.B, self.S)[self.seq]
        return xs[:, :, None, None] * xs[None, None, :, :]


def _norm(Sig, eps):
    q = np.sqrt(np.diag(Sig) + eps)
    return Sig / np.outer(q, q), q


def bytes_needed(model: Transformer, tokens_shape: tuple, backward: bool) -> float:
    """Memory of the recursion: a few R × R kernels per block forward, and backward a few
    (R S)² arrays (each output row's Π over the rows of its sequence)."""
    B, S = tokens_shape
    R = B * S
    return 8.0 * (6 * max(model.blocks, 1) + 4) * R * R + (8.0 * 6 * (R * S) ** 2
                                                          if backward else 0.0)


def _check(model: Transformer, tokens, what: str):
    if model.attention == "1/sqrt(d)":
        raise UnsupportedError(
            "attention = '1/sqrt(d)': its logits are Θ(1) Gaussians at initialization, so the "
            f"attention stays random in the limit and the {what} needs the law of a random "
            "softmax; the kernels here are for '1/d' (or 'none')")
    if model.tied:
        raise UnsupportedError(
            f"tied=True: the readout is the word embedding, which the forward pass uses too, "
            f"so f_0 is not independent of the features and the {what} of the recursion "
            "here (gradient independence) does not apply; use tied=False")
    tokens = model.check_tokens(tokens)
    require_memory(bytes_needed(model, tokens.shape, what != "NNGP"),
                   f"the transformer's {what} on {tokens.size} rows")
    return tokens


def _forward(model: Transformer, tokens):
    """(N(Σ_K), the final norm's q, per-block kernels, the embeddings' input Grams, the
    rows)."""
    rows = _Rows(tokens)
    s2, b2, eps = model.sigma ** 2, model.branch_multiplier ** 2, model.norm_eps
    words = tokens.ravel()
    inputs = {"E": (words[:, None] == words[None, :]).astype(float)}
    if model.positions:
        inputs["P"] = (rows.pos[:, None] == rows.pos[None, :]).astype(float)
    mix = np.kron(np.eye(rows.B), mixing_matrix(rows.S, model.causal))
    fn = moments(model.phi)
    Sig = s2 * sum(inputs.values())
    blocks = []
    for _ in range(model.blocks):
        c = {}
        if model.attention != "none":
            A, q = _norm(Sig, eps)
            So = s2 * mix @ A @ mix.T                  # o = M v, v = W_V N(h)
            Sig = Sig + b2 * s2 * So
            c.update(A=A, q=q, So=So)
        if model.mlp:
            A2, q2 = _norm(Sig, eps)
            V, Vd = pairwise(s2 * A2, fn)
            Sig = Sig + b2 * s2 * V
            c.update(A2=A2, q2=q2, V=V, Vd=Vd)
        blocks.append(c)
    F, qF = _norm(Sig, eps)
    return F, qF, blocks, inputs, rows


def transformer_nngp(model: Transformer, tokens) -> np.ndarray:
    """σ_out² N(Σ_K) (R, R) over the rows of ``tokens`` (B, S), r = b S + s: the covariance
    of each output word's f_0 when the readout's entries are N(0, σ_out²/n) (param 'ntk' or
    'sp'); under μP f_0 → 0 and this is σ_out² times the final features' kernel."""
    tokens = _check(model, tokens, "NNGP")
    return model.sigma_out ** 2 * _forward(model, tokens)[0]


def transformer_ntk(model: Transformer, tokens, components: bool = False):
    """The limiting tangent kernel (R, R) of the module docstring on ``tokens`` (B, S), in
    the rates of the model's parametrization under SGD: one SGD step at rate η changes
    each word's f by −η K χ + O(η²).  ``components=True``: a dict parameter name -> its
    share (the queries' and keys' are 0)."""
    tokens = _check(model, tokens, "tangent kernel")
    if model.param == "sp":
        raise UnsupportedError(
            "param = 'sp': at a width-free rate the hidden matrices' share of the tangent "
            "kernel grows like n, so there is no limiting kernel; use 'ntk' or 'mup'")
    F, qF, blocks, inputs, rows = _forward(model, tokens)
    s2, b2, so2 = model.sigma ** 2, model.branch_multiplier ** 2, model.sigma_out ** 2
    M = mixing_matrix(rows.S, model.causal)
    share = lambda Pi, X: so2 * (Pi * rows.pairs(X)).sum(axis=(1, 3))  # noqa: E731
    e = (rows.pos[:, None] == np.arange(rows.S)).astype(float)
    # the readout's vector at row a only, through the final norm
    Pi = e[:, :, None, None] * e[None, None, :, :] / rows.scale(qF)
    out = {"out": F}
    for k in range(model.blocks, 0, -1):
        c = blocks[k - 1]
        if model.mlp:
            Py = b2 * Pi
            out[f"D{k}"] = share(Py, c["V"])
            Pu = s2 * Py * rows.pairs(c["Vd"])
            out[f"U{k}"] = share(Pu, c["A2"])
            Pi = Pi + s2 * Pu / rows.scale(c["q2"])
        if model.attention != "none":
            Py = b2 * Pi
            out[f"O{k}"] = share(Py, c["So"])
            Pv = s2 * np.einsum("asbt,su,tw->aubw", Py, M, M)
            out[f"V{k}"] = share(Pv, c["A"])
            out[f"Q{k}"] = out[f"K{k}"] = np.zeros_like(F)
            Pi = Pi + s2 * Pv / rows.scale(c["q"])
    for name, X in inputs.items():
        out[name] = share(Pi, X)
    comps = {name: model.rate_factor(kind) * out[name]
             for name, kind in model.parameter_kinds().items()}
    return comps if components else sum(comps.values())
