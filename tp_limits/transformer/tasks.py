"""A small language task shipped with the package: sequences of a random Markov chain of
order k over V words (docs/theory.md §17.4).

The chain's next-word law given the last k words is drawn once per context from a
symmetric Dirichlet(α) (small α: nearly deterministic transitions); the first k words are
uniform.  A sequence of S + 1 words gives the inputs ξ_1..ξ_S and the next-word targets
ξ_2..ξ_{S+1}.  The chain's conditional entropy is the least loss any model can reach on
positions s ≥ k (:attr:`TokenTask.entropy`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.options import check_seed
from ..spec.checks import check_int, finite_positive


@dataclass(frozen=True)
class TokenTask:
    """Training and evaluation sequences: ``tokens`` (B, S) and next-word ``targets``
    (B, S) over ``vocab`` words; ``entropy``: the chain's mean conditional entropy (nats)."""

    vocab: int
    tokens: np.ndarray
    targets: np.ndarray
    eval_tokens: np.ndarray
    eval_targets: np.ndarray
    entropy: float

    @property
    def seq_len(self) -> int:
        return self.tokens.shape[1]


def markov_task(vocab: int = 16, seq_len: int = 8, order: int = 2, n_train: int = 32,
                n_eval: int = 16, alpha: float = 0.3, seed: int = 0) -> TokenTask:
    """Sample the task of the module docstring (``n_train`` and ``n_eval`` sequences)."""
    vocab, seq_len = check_int(vocab, "vocab", 2), check_int(seq_len, "seq_len")
    order = check_int(order, "order", 0)
    n_train, n_eval = check_int(n_train, "n_train"), check_int(n_eval, "n_eval")
    alpha = finite_positive(alpha, "alpha")
    rng = np.random.default_rng(check_seed(seed))
    table = rng.dirichlet(np.full(vocab, alpha), size=vocab ** order)   # context -> law
    seqs = np.empty((n_train + n_eval, seq_len + 1), dtype=np.int64)
    seqs[:, :order] = rng.integers(vocab, size=(n_train + n_eval, min(order, seq_len + 1)))
    for s in range(order, seq_len + 1):
        context = np.zeros(len(seqs), dtype=np.int64)
        for j in range(s - order, s):
            context = context * vocab + seqs[:, j]
        u = rng.random(len(seqs))[:, None]
        seqs[:, s] = np.minimum((u > np.cumsum(table[context], axis=1)).sum(axis=1),
                                vocab - 1)
    safe = np.where(table > 0, table, 1.0)
    entropy = float(np.mean(-(table * np.log(safe)).sum(axis=1)))
    x, y = seqs[:, :-1], seqs[:, 1:]
    return TokenTask(vocab, x[:n_train], y[:n_train], x[n_train:], y[n_train:], entropy)
