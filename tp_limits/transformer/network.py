"""A finite transformer at width n: its parameters, forward pass and backward pass
(docs/theory.md §17.1).

Arrays: tokens (B, S) of ints in [0, V); the residual stream h (B, S, n); per head the
queries, keys and values (B, H, S, d_head); the logits and attention weights (B, H, S, S);
the output f (B, S, V).  The backward pass is written out by hand (the tests check it
against central differences and torch's autograd) so that the forward quantities the
limit will replace by moments — the logits, the softmax, the norms' averages — are named.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..engine.backend import numpy_backend
from ..nonlinearities import get_nonlinearity
from .model import Transformer
from .parametrization import init_exponent

_NP = numpy_backend()


def init_params(model: Transformer, n: int, rng) -> dict:
    """name -> array of every parameter at width ``n``: entries N(0, σ² n^{−2b}) (the
    readout with ``sigma_out``), W_Q = 0 with ``zero_query``."""
    model.head_width(n)
    params = {}
    for name, kind in model.parameter_kinds().items():
        sigma = model.sigma_out if kind == "readout" else model.sigma
        std = sigma * n ** -float(init_exponent(model.param, kind))
        params[name] = std * rng.standard_normal(model.shape(name, n))
    if model.zero_query:
        for k in range(1, model.blocks + 1):
            params[f"Q{k}"][...] = 0.0
    return params


class LastAxisAverages:
    """Averages over the last axis: a finite network's width, or the limit's particles."""

    @staticmethod
    def mean(x):
        """The mean of each row, (…, m, 1)."""
        return x.mean(axis=-1, keepdims=True)

    @staticmethod
    def row_moment(a, b):
        """The mean of a_i b_i row by row, (…, m, 1)."""
        return (a * b).mean(axis=-1, keepdims=True)


WIDTH = LastAxisAverages()


def layer_norm(h, eps: float, averages=WIDTH):
    """(y, s): y = (h − mean h)/s, s = √(var h + ε) row by row, the means those of
    ``averages`` (over the width here; the limit's expectations, docs/theory.md §14.3)."""
    c = h - averages.mean(h)
    s = np.sqrt(averages.row_moment(c, c) + eps)
    return c / s, s


def layer_norm_backward(y, s, dy, averages=WIDTH):
    """δh = (δy − mean δy − y mean(δy y))/s."""
    return (dy - averages.mean(dy) - y * averages.row_moment(dy, y)) / s


def attention_weights(logits, causal: bool):
    """softmax over the keys (the last axis) of the logits (…, S, S), causal: s' ≤ s only."""
    S = logits.shape[-1]
    z = np.where(np.tril(np.ones((S, S), bool)), logits, -np.inf) if causal else logits
    z = z - z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=-1, keepdims=True)


def logits_gradient(p, dp, scale: float):
    """∂ℓ (times the logits' multiplier ``scale``) from the attention weights p and
    ∂p: p ⊙ (∂p − Σ_{s'} p ∂p), through the softmax."""
    return scale * p * (dp - (dp * p).sum(axis=-1, keepdims=True))


def _heads(x, H):
    B, S, n = x.shape
    return x.reshape(B, S, H, n // H).transpose(0, 2, 1, 3)


def _merge(x):
    B, H, S, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, S, H * d)


def _linear(x, W):
    """x Wᵀ over the last axis, as one 2-d product (a stacked product with a transposed
    operand would loop over the leading axes outside BLAS)."""
    return (x.reshape(-1, x.shape[-1]) @ W.T).reshape(x.shape[:-1] + (W.shape[0],))


def _weight_grad(g, x):
    """Σ over batch and positions of g xᵀ: the gradient of W in g = W x."""
    return g.reshape(-1, g.shape[-1]).T @ x.reshape(-1, x.shape[-1])


@dataclass
class Forward:
    """What the backward pass needs of one forward pass, and what coordinate checks read:
    ``f`` (B, S, V); per block k ``logits[k]`` (B, H, S, S) before the mask."""

    f: np.ndarray
    tokens: np.ndarray
    final: tuple
    blocks: list = field(default_factory=list)

    @property
    def logits(self) -> list:
        return [b["logits"] for b in self.blocks if "logits" in b]

    def take(self, seqs) -> "Forward":
        """The forward pass of the sequences ``seqs`` (indices, repeats allowed)."""
        pick = lambda x: x[seqs] if isinstance(x, np.ndarray) else x  # noqa: E731
        return Forward(self.f[seqs], self.tokens[seqs], tuple(pick(x) for x in self.final),
                       [{k: pick(x) for k, x in c.items()} for c in self.blocks])


def readout(model: Transformer, params: dict):
    """W_out (V, n): the readout's own, or the tied (σ_out/n) Eᵀ."""
    if model.tied:
        E = params["E"]
        return model.sigma_out / E.shape[0] * E.T
    return params["out"]


def forward(model: Transformer, params: dict, tokens) -> Forward:
    """The network's output on ``tokens`` (B, S), S ≤ seq_len."""
    B, S = tokens.shape
    n = params["E"].shape[0]
    H, eps, beta = model.heads, model.norm_eps, model.branch_multiplier
    phi = get_nonlinearity(model.phi)
    h = params["E"].T[tokens]
    if model.positions:
        h = h + params["P"].T[:S]
    blocks = []
    scale = model.attn_mult * (n // H) ** -float(model.attention_exponent or 0)
    for k in range(1, model.blocks + 1):
        c = {}
        if model.attention != "none":
            a, s = layer_norm(h, eps)
            q, kk, v = (_heads(_linear(a, params[f"{m}{k}"]), H) for m in "QKV")
            logits = scale * q @ kk.transpose(0, 1, 3, 2)
            p = attention_weights(logits, model.causal)
            o = _merge(p @ v)
            h = h + beta * _linear(o, params[f"O{k}"])
            c.update(a=a, s=s, q=q, k=kk, v=v, logits=logits, p=p, o=o, scale=scale)
        if model.mlp:
            a2, s2 = layer_norm(h, eps)
            u = _linear(a2, params[f"U{k}"])
            y = phi.phi(u, _NP)
            h = h + beta * _linear(y, params[f"D{k}"])
            c.update(a2=a2, s2=s2, u=u, y=y)
        c["h"] = h
        blocks.append(c)
    aF, sF = layer_norm(h, eps)
    return Forward(_linear(aF, readout(model, params)), tokens, (aF, sF), blocks)


def one_hot(index, size: int):
    """(…, size) rows e(index): the inputs of an embedding, one column per word."""
    return (np.asarray(index)[..., None] == np.arange(size)).astype(float)


def backward(model: Transformer, params: dict, fw: Forward, df,
             weight_grad=_weight_grad) -> dict:
    """name -> ∂loss/∂parameter, from ∂loss/∂f = ``df`` (B, S, V) and the forward pass.

    Every parameter W enters as g = W x (the embeddings with x the one-hot words and
    positions), and its gradient is ``weight_grad(∂loss/∂g, x)``: Σ g xᵀ by default, or
    whatever a caller keeps of the pair (the tangent kernel keeps both factors)."""
    beta, H = model.branch_multiplier, model.heads
    dphi = get_nonlinearity(model.phi).dphi
    grads = {}
    aF, sF = fw.final
    if not model.tied:
        grads["out"] = weight_grad(df, aF)
    dh = layer_norm_backward(aF, sF, _linear(df, readout(model, params).T))
    for k in range(model.blocks, 0, -1):
        c = fw.blocks[k - 1]
        if model.mlp:
            dout = beta * dh
            grads[f"D{k}"] = weight_grad(dout, c["y"])
            du = _linear(dout, params[f"D{k}"].T) * dphi(c["u"], _NP)
            grads[f"U{k}"] = weight_grad(du, c["a2"])
            dh = dh + layer_norm_backward(c["a2"], c["s2"], _linear(du, params[f"U{k}"].T))
        if model.attention != "none":
            dout = beta * dh
            grads[f"O{k}"] = weight_grad(dout, c["o"])
            do = _heads(_linear(dout, params[f"O{k}"].T), H)
            p = c["p"]
            dp = do @ c["v"].transpose(0, 1, 3, 2)
            dv = p.transpose(0, 1, 3, 2) @ do
            dl = logits_gradient(p, dp, c["scale"])
            dq = dl @ c["k"]
            dk = dl.transpose(0, 1, 3, 2) @ c["q"]
            da = 0.0
            for m, g in (("Q", dq), ("K", dk), ("V", dv)):
                g = _merge(g)
                grads[f"{m}{k}"] = weight_grad(g, c["a"])
                da = da + _linear(g, params[f"{m}{k}"].T)
            dh = dh + layer_norm_backward(c["a"], c["s"], da)
    grads["E"] = weight_grad(dh, one_hot(fw.tokens, model.vocab))
    if model.tied:                      # and E as the readout, W_out = (σ_out/n) Eᵀ
        grads["E"] = grads["E"] + model.sigma_out / aF.shape[-1] * weight_grad(df, aF).T
    if model.positions:
        S = dh.shape[1]
        grads["P"] = weight_grad(dh, np.broadcast_to(np.eye(S, model.seq_len), dh.shape[:2]
                                                     + (model.seq_len,)))
    return grads
