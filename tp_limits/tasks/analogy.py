"""Word analogies "a is to b as c is to d" and their accuracy by 3CosAdd
(docs/theory.md §15.4).

For a question (a, b, c, d) the answer is the word w ∉ {a, b, c} maximizing
cos(u_w, û_b − û_a + û_c), û = u/‖u‖, with inner products given by a Gram matrix of the
embeddings (finite width: ⟨u_i, u_j⟩/n; the limit: E[Z^{u_i} Z^{u_j}]).  A question
scores 1/m when d is among m words tied at the maximum (the expected score of a random
tie-break), so embeddings that carry no information, whose scores all tie, score chance
1/(V − 3) exactly instead of whatever the first index happens to be.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import SpecError

#: relative gap under which two cosines count as tied
TIE = 1e-9


@dataclass(frozen=True)
class Questions:
    """Analogy questions as word quadruples, grouped by section (``questions-words.txt``
    format: ``: section`` lines, then ``a b c d`` lines)."""

    sections: tuple          # (name, ((a, b, c, d), ...)) pairs

    @classmethod
    def load(cls, path) -> "Questions":
        path = Path(path)
        if not path.is_file():
            raise SpecError(f"no analogy question file at {str(path)!r}")
        sections, name, rows = [], None, []
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith(":"):
                if name is not None:
                    sections.append((name, tuple(rows)))
                name, rows = line[1:].strip(), []
                continue
            words = line.lower().split()
            if len(words) != 4 or name is None:
                raise SpecError(f"{path.name} line {line_no}: expected a ': section' line or "
                                f"four words, got {line!r}")
            rows.append(tuple(words))
        if name is not None:
            sections.append((name, tuple(rows)))
        return cls(tuple(sections))

    def __len__(self) -> int:
        return sum(len(rows) for _, rows in self.sections)

    def covered(self, words) -> tuple:
        """(indices (Q, 4) into ``words``, section of each) of the questions whose four
        words all lie in ``words``."""
        index = {w: i for i, w in enumerate(words)}
        idx, where = [], []
        for name, rows in self.sections:
            for q in rows:
                if all(w in index for w in q):
                    idx.append([index[w] for w in q])
                    where.append(name)
        return np.array(idx, dtype=np.int64).reshape(-1, 4), tuple(where)


def analogy_scores(gram: np.ndarray, questions: np.ndarray) -> np.ndarray:
    """The 3CosAdd score (1/m for a correct answer among m tied best words, else 0) of
    each question (rows of word indices (a, b, c, d)) under the embeddings' Gram matrix
    ``gram`` (V × V, symmetric positive semi-definite)."""
    gram = np.asarray(gram, dtype=np.float64)
    q = np.asarray(questions, dtype=np.int64)
    if q.size == 0:
        return np.zeros(0)
    norm = np.sqrt(np.maximum(np.diag(gram), 0.0))
    norm = np.where(norm > 0, norm, 1.0)
    cos = gram / norm[:, None] / norm[None, :]        # cos(u_i, u_j)
    a, b, c, d = q.T
    score = cos[b] - cos[a] + cos[c]                  # ∝ cos(u_w, û_b − û_a + û_c) in w
    rows = np.arange(len(q))
    for col in (a, b, c):
        score[rows, col] = -np.inf
    best = score.max(axis=1, keepdims=True)
    tied = score >= best - TIE * np.maximum(np.abs(best), 1.0)
    hit = tied[rows, d]
    return np.where(hit, 1.0 / tied.sum(axis=1), 0.0)
