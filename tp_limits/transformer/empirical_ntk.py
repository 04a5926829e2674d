"""A finite transformer's tangent kernel at initialization, in its parametrization's rates
(docs/theory.md §17.6): the finite counterpart of :func:`~.kernels.transformer_ntk`.

    K_vv'(a, b) = Σ_W n^{−c_W} ⟨∂f_v(a)/∂W, ∂f_v'(b)/∂W⟩,

so that one SGD step at rate η changes f by −η K χ + O(η²).  Every parameter enters as
g = W x (the embeddings with one-hot x), so ∂f_v(a)/∂W = Σ_r g_r^{(a,v)} x_rᵀ over the rows
r of a's sequence and the inner product factorizes,

    ⟨∂f_v(a)/∂W, ∂f_v'(b)/∂W⟩ = Σ_{r, r'} (g_r^{(a,v)} · g_{r'}^{(b,v')}) (x_r · x_{r'}),

with the backward vectors g^{(a,v)} of every output from one batched backward pass of the
network's own.  In the limit K_vv' = δ_vv' K (:func:`~.kernels.transformer_ntk`); at width n
both the cross terms and the differences between words are Θ(n^{−½}).
"""
from __future__ import annotations

import numpy as np

from ..engine.memory import require_memory
from ..engine.options import check_seed
from ..errors import UnsupportedError
from ..spec.checks import check_width
from .model import Transformer
from .network import backward, forward, init_params
from .parametrization import learning_rate


def bytes_needed(model: Transformer, tokens_shape: tuple, width: int) -> float:
    """Memory of :func:`empirical_transformer_ntk`: one backward pass over every output's
    sequence (R V sequences of S rows, a dozen width-n arrays per block) and the Grams of
    its R V S rows."""
    B, S = tokens_shape
    rows = B * S * model.vocab * S
    return 8.0 * (3 * rows * rows + rows * width * (12 * max(model.blocks, 1) + 4))


def empirical_transformer_ntk(model: Transformer, tokens, width: int, seed: int = 0,
                              components: bool = False):
    """K (R, V, R, V) over the rows r = b S + s of ``tokens`` (B, S) and the output words,
    of the network :func:`~.train.train_transformer` draws at ``width`` and ``seed``, in
    the rates of its parametrization under SGD; ``components=True``: a dict parameter
    name -> its share.  Refused before work when it would not fit in memory."""
    if model.tied:
        raise UnsupportedError("tied=True: the tangent kernel is computed for an untied "
                               "readout, as its limit is (transformer_ntk)")
    tokens = model.check_tokens(tokens)
    width = check_width(width)
    seed = check_seed(seed)
    model.head_width(width)
    require_memory(bytes_needed(model, tokens.shape, width),
                   f"a transformer's tangent kernel at width {width} on {tokens.size} rows")
    params = init_params(model, width, np.random.default_rng(seed))
    B, S = tokens.shape
    R, V = B * S, model.vocab
    outputs = np.arange(R * V)                    # output i = (row a, word v), a = i // V
    a, v = outputs // V, outputs % V
    fw = forward(model, params, tokens).take(a // S)
    df = np.zeros((R * V, S, V))
    df[outputs, a % S, v] = 1.0

    def pair_gram(g, x):
        G, X = g.reshape(R * V * S, -1), x.reshape(R * V * S, -1)
        gram = ((G @ G.T) * (X @ X.T)).reshape(R * V, S, R * V, S).sum(axis=(1, 3))
        return gram.reshape(R, V, R, V)

    shares = backward(model, params, fw, df, weight_grad=pair_gram)
    shares = {p: learning_rate(model, "sgd", k, 1.0, width) * shares[p]
              for p, k in model.parameter_kinds().items()}
    return shares if components else sum(shares.values())
