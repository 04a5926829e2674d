"""A pre-norm transformer as a problem spec: its architecture and its abc-parametrization
(docs/theory.md §17.1–17.2).

Tokens ξ = (ξ_1..ξ_S) over a vocabulary of V words enter as one-hot vectors, so the
embedding is an input layer with d_in = V:

    h_s = E e(ξ_s) + P e_s                              E ∈ ℝ^{n×V}, P ∈ ℝ^{n×S}
    per block k = 1..K (pre-norm, residual branches with multiplier β, times K^{−α}
    with a residual rule):
      a = N(h);  q = W_Q a, k = W_K a, v = W_V a        W_· ∈ ℝ^{n×n}, H heads of width n/H
      ℓ_{ss'} = c q_s·k_{s'} / d_head^{a_attn}          a_attn = 1 ("1/d") or ½ ("1/sqrt(d)")
      h ← h + β W_O Σ_{s'} softmax_{s'}(ℓ_s)_{s'} v_{s'}   (causal: s' ≤ s)
      h ← h + β W_D φ(W_U N(h))
    f_s = W_out N(h_s) ∈ ℝ^V                            W_out ∈ ℝ^{V×n}
                                                        (tied: W_out = (σ_out/n) Eᵀ)

with N the LayerNorm of docs/theory.md §14.3 (no gains).  Every parameter is drawn with
entries N(0, σ² n^{−2b}) and trained at the rate η n^{−c} (SGD) with the exponents of
:mod:`.parametrization`; the logits' multiplier c and the attention exponent a_attn are
width-free constants.  A residual rule (:class:`~tp_limits.Residual` (α, γ), as for MLPs,
docs/theory.md §12) multiplies every branch by K^{−α} and the rates of the hidden matrices
(W_Q, W_K, W_V, W_O, W_U, W_D) by K^{−γ}, K the number of blocks: width-free constants at
a fixed K, so the width exponents, the finite networks and the limit follow them unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import SpecError
from ..nonlinearities import get_nonlinearity
from ..spec.checks import (check_bool, check_choice, check_int, check_width,
                           finite_positive)
from ..spec.residual import Residual

#: the attention scales and their exponent a_attn in ℓ = c q·k / d_head^{a_attn}
ATTENTION_SCALES = {"1/d": Fraction(1), "1/sqrt(d)": Fraction(1, 2)}
#: the parametrizations (their exponents in :mod:`.parametrization`)
PARAMETRIZATIONS = ("mup", "sp", "ntk")
#: the losses: cross-entropy of the next token at every position, or of a target at the last
LOSSES = ("next_token", "last")

#: how a divergence's "layer" reads for a transformer
BLOCKS = "layers count the blocks"

#: every field's check, declared once: (check, arguments after the value and the name)
_CHECKS = {
    "vocab": (check_int, (2,)), "seq_len": (check_int, (1,)), "blocks": (check_int, (0,)),
    "heads": (check_int, (1,)),
    "attention": (check_choice, (tuple(ATTENTION_SCALES) + ("none",),)),
    "param": (check_choice, (PARAMETRIZATIONS,)), "loss": (check_choice, (LOSSES,)),
    "causal": (check_bool, ()), "zero_query": (check_bool, ()), "positions": (check_bool, ()),
    "mlp": (check_bool, ()), "tied": (check_bool, ()),
    "attn_mult": (finite_positive, ()), "branch": (finite_positive, ()),
    "sigma": (finite_positive, ()), "sigma_out": (finite_positive, ()),
    "norm_eps": (finite_positive, ()),
}


@dataclass(frozen=True)
class Transformer:
    """The network of the module docstring.

    ``vocab`` V, ``seq_len`` S, ``blocks`` K (0: embeddings, norm and readout only),
    ``heads`` H (the width n must be a multiple of H), ``phi`` the MLP's nonlinearity,
    ``attention`` "1/d" (μP), "1/sqrt(d)" (standard practice) or "none" (blocks without
    their attention branch), ``attn_mult`` c, ``causal`` mask, ``zero_query``: W_Q = 0 at
    initialization, ``positions``: learned positional embeddings P, ``mlp``: blocks with
    their MLP branch, ``param`` "mup", "sp" or "ntk" (:mod:`.parametrization`), ``branch`` β,
    ``sigma`` the initialization's σ (embeddings and matrices), ``sigma_out`` the readout's,
    ``norm_eps`` LayerNorm's ε, ``loss`` "next_token" or "last", ``tied``: the readout is
    the word embedding, W_out = (σ_out/n) Eᵀ (μP's 1/n readout; μP only), with no readout
    of its own, ``residual`` a :class:`~tp_limits.Residual` with ``block_depth=2`` (each
    branch holds two matrices on its path, W_V then W_O, W_U then W_D): branches β K^{−α},
    the hidden matrices' rates times K^{−γ} (module docstring).
    """

    vocab: int
    seq_len: int
    blocks: int = 1
    heads: int = 1
    phi: str = "relu"
    attention: str = "1/d"
    attn_mult: float = 1.0
    causal: bool = True
    zero_query: bool = False
    positions: bool = True
    mlp: bool = True
    param: str = "mup"
    branch: float = 1.0
    sigma: float = 1.0
    sigma_out: float = 1.0
    norm_eps: float = 1e-5
    loss: str = "next_token"
    tied: bool = False
    residual: Residual | None = None

    def __post_init__(self):
        for name, (check, args) in _CHECKS.items():
            object.__setattr__(self, name, check(getattr(self, name), name, *args))
        get_nonlinearity(self.phi)
        if self.zero_query and self.attention == "none":
            raise SpecError("zero_query=True needs an attention branch (attention='none')")
        if self.tied and self.param != "mup":
            raise SpecError(f"tied=True with param = {self.param!r}: a tied readout is "
                            "(σ_out/n) Eᵀ, μP's readout scale; use param = 'mup'")
        self._check_residual()

    def _check_residual(self) -> None:
        r = Residual.of(self.residual)
        if r is None:
            return
        if r.block_depth != 2:
            raise SpecError(f"residual = {r!r} has block_depth = {r.block_depth}; a "
                            "transformer's branches hold two matrices on their path (W_V then "
                            "W_O, W_U then W_D): use block_depth=2, e.g. "
                            "Residual.depth_mup('adam', block_depth=2)")
        if self.blocks < 1:
            raise SpecError("residual needs blocks >= 1 (K^(-alpha) of K = 0 blocks)")
        r.check_blocks(self.blocks)

    @property
    def branch_multiplier(self) -> float:
        """What multiplies every branch: β, times K^{−α} under a residual rule."""
        if self.residual is None:
            return self.branch
        return self.branch * self.residual.branch_of(self.blocks)

    def rate_factor(self, kind: str) -> float:
        """The width-free factor on the rate of a parameter of ``kind``: K^{−γ} for the
        hidden matrices under a residual rule, else 1."""
        if self.residual is None or kind != "hidden":
            return 1.0
        return self.residual.lr_factor_of(self.blocks)

    @property
    def attention_exponent(self) -> Fraction | None:
        """a_attn of ℓ = c q·k / d_head^{a_attn} (None without attention)."""
        return ATTENTION_SCALES.get(self.attention)

    def check_task(self, task) -> None:
        """A SpecError before any work when ``task``'s words or sequences do not fit."""
        if task.vocab != self.vocab or task.seq_len > self.seq_len:
            raise SpecError(f"task has vocab {task.vocab} and sequences of {task.seq_len}; "
                            f"the model has vocab = {self.vocab}, seq_len = {self.seq_len}")

    def check_tokens(self, tokens, name: str = "tokens") -> np.ndarray:
        """``tokens`` as an int array (B, S) of words in [0, V) with S ≤ seq_len, or a
        SpecError naming ``name``."""
        arr = np.asarray(tokens)
        if arr.ndim != 2 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
            raise SpecError(f"{name} must be a non-empty 2-d int array (sequences, "
                            f"positions); got shape {arr.shape} of {arr.dtype}")
        if arr.min() < 0 or arr.max() >= self.vocab or arr.shape[1] > self.seq_len:
            raise SpecError(f"{name} has words in [{arr.min()}, {arr.max()}] and "
                            f"{arr.shape[1]} positions; the model has vocab = {self.vocab}, "
                            f"seq_len = {self.seq_len}")
        return arr.astype(np.int64)

    def head_width(self, n: int) -> int:
        """d_head = n/H, or a SpecError naming ``width`` when H does not divide it."""
        n = check_width(n)
        if n % self.heads:
            raise SpecError(f"width = {n} is not a multiple of heads = {self.heads}")
        return n // self.heads

    def parameter_kinds(self) -> dict:
        """name -> kind ("embedding", "hidden" or "readout") of every trained array, in the
        order a network draws them."""
        kinds = {"E": "embedding"}
        if self.positions:
            kinds["P"] = "embedding"
        for k in range(1, self.blocks + 1):
            if self.attention != "none":
                kinds.update({f"{m}{k}": "hidden" for m in ("Q", "K", "V", "O")})
            if self.mlp:
                kinds.update({f"U{k}": "hidden", f"D{k}": "hidden"})
        if not self.tied:
            kinds["out"] = "readout"
        return kinds

    def shape(self, name: str, n: int) -> tuple:
        """The shape of parameter ``name`` at width ``n``."""
        if name == "E":
            return (n, self.vocab)
        if name == "P":
            return (n, self.seq_len)
        if name == "out":
            return (self.vocab, n)
        return (n, n)
