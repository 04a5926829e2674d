"""Word2Vec (CBOW with negative sampling) as the package's one-hidden-layer linear network,
at width n and in its infinite-width limits (docs/theory.md §15.2–15.3).

The network is :func:`cbow_network`: ``param`` with d_in = d_out = V, φ = id and its readout
initialized to 0 (b₂ = ∞).  The input ξ is the
mean of the context words' one-hot vectors, h = W¹ξ the mean of their input embeddings
u_w = W¹e_w, the output f_j = α W²_j h with W²_j the output embedding of word j, which
starts at 0 as in the reference program.  Training is the package's SGD in W-space with
the ``sgns`` loss, f evaluated only at the target and the negative samples.

Both engines run one recursion on a pair of V × m matrices (E_in, E_out), rows the
embeddings: with χ_{bj} = ∇_j ℓ_b / B,

    E_out[j] −= η_out α Σ_b χ_{bj} h_b,      E_in[w] −= η_in α Σ_b ξ_{bw} Σ_j χ_{bj} E_out[j],

simultaneously.  At width n, m = n, E_in = W¹ᵀ (entries N(0, σ²)), E_out = W² and
(η_in, η_out) the W-space rates of ``MLP.finite_constants``.  In the feature-learning limit
every embedding stays in the span of the initial ones: Z^{u_w} = Σ_v A_{wv} z_v and
Z^{nW²_j} = Σ_v C_{jv} z_v with z_v iid N(0, 1), so m = V, E_in = A (A_0 = σI),
E_out = C (C_0 = 0) and (η_in, η_out) = ``MLP.limit_constants``'s η_l (an exact recursion,
no Monte Carlo).  Inner products of embeddings are ⟨u_i, u_j⟩/n, resp. E[Z^{u_i} Z^{u_j}]
= (AAᵀ)_{ij}: :attr:`EmbeddingRun.gram`.  In the kernel limits (NTK, GP) the input
embeddings stay at initialization, A ≡ σI; ``limit="gp"`` runs the GP limit (the readout
alone trains, C −= η_out α Σ χ ξᵀA with A = σI).
"""
from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..engine.progress import compile_notice, progress_bar
from ..engine.status import RunStatus
from ..engine.steps import StepLoop, check_size
from ..errors import SpecError
from ..losses import get_loss
from ..spec.checks import check_choice, check_int
from ..spec.mlp import MLP
from ..spec.schedules import resolve
from . import cbow_kernel
from .analogy import analogy_scores
from .corpus import CBOWBatch, CBOWStream
from .pair import (LIMITS, check_network, initial, rates, width_label,
                   zero_readout_network)


def cbow_network(param, vocab_size: int, sigma: float = 1.0) -> MLP:
    """The CBOW network over a vocabulary of ``vocab_size`` words: ``param`` (L = 1, e.g.
    ``tp.mup(1)`` or ``tp.ntp(1)``) with its readout initialized to 0 (b₂ = ∞: the output
    embeddings start at 0), φ = id, input embeddings of std ``sigma``."""
    V = check_int(vocab_size, "vocab_size", 2)
    return zero_readout_network(param, V, V, sigma)


@dataclass(frozen=True)
class EmbeddingRun:
    """Embeddings after a Word2Vec run.

    ``embeddings`` (V × m): rows the input embeddings (finite: u_w ∈ ℝⁿ; limit: their
    coefficients A_w); ``outputs`` the output embeddings likewise; ``scale``: inner
    products are ``scale`` · E Eᵀ (1/n, or 1 in a limit); ``width``: n, or inf;
    ``loss``: the training loss (batch mean) of every completed step; ``status``: how the
    run ended (RunStatus: completed steps, Ctrl-C, divergence)."""

    width: float
    limit: str | None
    embeddings: np.ndarray
    outputs: np.ndarray
    scale: float
    alpha: float
    loss: np.ndarray
    status: RunStatus

    @property
    def gram(self) -> np.ndarray:
        """⟨u_i, u_j⟩/n (finite) or E[Z^{u_i} Z^{u_j}] (limit), V × V."""
        return self.scale * (self.embeddings @ self.embeddings.T)

    def analogy(self, questions: np.ndarray) -> np.ndarray:
        """3CosAdd scores of ``questions`` (Q × 4 word indices): analogy.analogy_scores."""
        return analogy_scores(self.gram, questions)

    def output(self, X: np.ndarray) -> np.ndarray:
        """f(ξ) = α W² W¹ ξ for the rows ξ of X (B × V): finite, or its limit α C Aᵀ ξ."""
        return self.alpha * (np.asarray(X) @ self.embeddings) @ self.outputs.T


def _context_matrix(batch: CBOWBatch, words: np.ndarray) -> sp.csr_matrix:
    """ξ as a sparse B × |words| matrix (context means over the columns ``words``)."""
    ctx = batch.context
    used = ctx >= 0
    rows = np.nonzero(used)[0]
    cols = np.searchsorted(words, ctx[used])
    vals = batch.context_weights()[rows]
    return sp.csr_matrix((vals, (rows, cols)), shape=(len(ctx), len(words)))


_SGNS = get_loss("sgns")


def _sgns(f: np.ndarray, y: np.ndarray) -> tuple:
    """The batch's mean ``sgns`` loss and χ = ∇_f ℓ / B at the selected outputs."""
    return float(np.mean(_SGNS.value(f, y, np))), _SGNS.grad(f, y, np) / len(f)


def _outputs(batch: CBOWBatch) -> tuple:
    """(indices (B, 1+k) of the target and the negatives, their sgns weights y)."""
    idx = np.ascontiguousarray(np.concatenate([batch.target[:, None], batch.negatives], axis=1))
    y = np.concatenate([np.ones((len(batch), 1)), -batch.weights], axis=1)
    return idx, y


def cbow_step(E_in, E_out, batch: CBOWBatch, lr_in: float, lr_out: float, alpha: float,
              step: int = 0, bound: float | None = 1e10, work=None) -> float:
    """One SGD step of (15.1) in place, by the fused kernel of tasks/cbow_kernel.py; the
    batch's mean ``sgns`` loss before the step.  Raises DivergenceError (step, layer) on a
    non-finite or out-of-bound hidden vector (layer 1) or output (the readout), before
    anything is updated.  ``work``: the kernel's buffers (cbow_kernel.buffers), reused
    across steps."""
    idx, y = _outputs(batch)
    h, back = work if work is not None else cbow_kernel.buffers(len(batch), E_in.shape[1])
    f = np.empty(idx.shape)
    ctx = np.ascontiguousarray(batch.context)
    weights = batch.context_weights()
    cbow_kernel.forward(E_in, E_out, ctx, weights, idx, alpha, h, f)
    check_size(h, step, 1, "pre-activation", bound)
    check_size(f, step, None, "output", bound)
    loss, chi = _sgns(f, y)
    cbow_kernel.backward(E_in, E_out, ctx, weights, idx, chi, h, back, lr_in, lr_out, alpha)
    return loss


def cbow_step_numpy(E_in, E_out, batch: CBOWBatch, lr_in: float, lr_out: float,
                    alpha: float, step: int = 0, bound: float | None = 1e10) -> float:
    """:func:`cbow_step` in plain NumPy and SciPy (sparse context and output matrices): the
    twin the kernel is tested against."""
    B = len(batch)
    in_words = np.unique(batch.context[batch.context >= 0])
    X = _context_matrix(batch, in_words)
    h = X @ E_in[in_words]                                     # B × m
    check_size(h, step, 1, "pre-activation", bound)
    idx, y = _outputs(batch)
    Eo = E_out[idx]                                            # B × (1+k) × m
    f = alpha * np.einsum("bkm,bm->bk", Eo, h)
    check_size(f, step, None, "output", bound)
    loss, chi = _sgns(f, y)
    back = np.einsum("bk,bkm->bm", chi, Eo)                    # Σ_j χ_bj E_out[j]
    out_words, inv = np.unique(idx, return_inverse=True)
    S = sp.csr_matrix((chi.reshape(-1), (inv.reshape(-1), np.repeat(np.arange(B), idx.shape[1]))),
                      shape=(len(out_words), B))               # duplicates summed
    E_out[out_words] -= (lr_out * alpha) * (S @ h)
    E_in[in_words] -= (lr_in * alpha) * (X.T @ back)
    return loss


def train_cbow(net: MLP, stream: CBOWStream, lr, width=math.inf, limit: str = "feature",
               seed: int = 0, init=None, progress: bool = False,
               divergence_bound: float | None = 1e10) -> EmbeddingRun:
    """Train the CBOW network ``net`` on ``stream``'s batches at ``width`` n (an int) or in
    the limit (``width=math.inf``; ``limit`` "feature" or "gp"); ``lr`` the base rate η
    or a schedule (one rate per step, or a function of the step: spec/schedules.py).

    ``seed`` draws the finite network's input embeddings; ``init`` = (E_in, E_out) replaces
    them (W¹ᵀ and W² of a width-n network).  Ctrl-C or a divergence ends the run early,
    with what was finished and the status saying where (docs/theory.md §15.2)."""
    check_network(net, "Word2Vec", "cbow_network")
    if not isinstance(stream, CBOWStream):
        raise SpecError(f"stream must be a CBOWStream, got {type(stream).__name__}")
    if stream.vocab_size != net.d_in:
        raise SpecError(f"the stream's vocabulary has {stream.vocab_size} words but the "
                        f"network has d_in = {net.d_in}")
    limit = check_choice(limit, "limit", LIMITS)
    T = stream.steps
    peak, factors = resolve(lr, T)
    factor = np.ones(T) if factors is None else factors
    lr_in, lr_out, alpha = rates(net, width, peak, limit)
    E_in, E_out, scale = initial(net, width, seed, init)
    losses = np.full(T, np.nan)
    work = cbow_kernel.buffers(stream.batch_size, E_in.shape[1])
    with progress_bar(progress, T, f"word2vec {width_label(width)}") as on_step:
        loop = StepLoop(T, on_step)
        batches = stream.batches()
        with loop:
            for t in loop:
                batch = next(batches, None)
                if batch is None:               # subsampling left fewer batches than planned
                    break
                with compile_notice("the CBOW kernel") if t == 0 else nullcontext():
                    losses[t] = cbow_step(E_in, E_out, batch, lr_in * factor[t],
                                          lr_out * factor[t], alpha, t, divergence_bound, work)
    status = RunStatus(loop.completed, loop.interrupted, loop.diverged)
    done = losses[: loop.completed]
    return EmbeddingRun(float(width), limit if width == math.inf else None, E_in, E_out,
                        scale, alpha, done, status)
