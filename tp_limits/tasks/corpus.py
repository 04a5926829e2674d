"""Text for Word2Vec: a wiki dump's article text as tokens, a vocabulary, and the CBOW
training examples with negative samples (docs/theory.md §15.2).

The example stream follows the reference word2vec program's choices:

* words outside the vocabulary are dropped before windows are formed;
* frequent words are subsampled once per epoch, word w kept with probability
  min(1, (√(c_w/(s·N)) + 1)·s·N/c_w) (c_w its count, N the corpus length, s = ``sample``);
* around each kept word the window half-width b is drawn uniformly from 1..``window`` and
  the context is the (up to 2b) kept words within b positions;
* ``negatives`` words are drawn from the unigram distribution raised to the power 3/4; a
  draw equal to the target word is skipped (weight 0).

One step's ``batch_size`` examples are consecutive words of the stream, in corpus order.
"""
from __future__ import annotations

import bz2
import html
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from ..errors import SpecError
from ..spec.checks import check_int

_TEXT = re.compile(r"<text[^>]*>(.*?)</text>", re.S)
_PAGE = re.compile(r"<page>(.*?)</page>", re.S)
_NS0 = re.compile(r"<ns>0</ns>")
_MARKUP = [
    (re.compile(r"<!--.*?-->", re.S), " "),                      # comments
    (re.compile(r"<ref[^>/]*/>", re.S), " "),                    # empty references
    (re.compile(r"<ref[^>]*>.*?</ref>", re.S), " "),             # references
    (re.compile(r"<[^>]+>"), " "),                               # other tags
    (re.compile(r"\{\|.*?\|\}", re.S), " "),                     # tables
    (re.compile(r"\[\[(?:file|image|category|[a-z\-]{2,12}):[^\[\]]*"
                r"(?:\[\[[^\]]*\]\][^\[\]]*)*\]\]", re.I), " "),  # files, categories, interwiki
    (re.compile(r"\[\[[^\]|]*\|([^\]]*)\]\]"), r"\1"),          # [[target|label]] -> label
    (re.compile(r"\[\[([^\]]*)\]\]"), r"\1"),                    # [[target]] -> target
    (re.compile(r"\[https?://\S+\s*([^\]]*)\]"), r"\1"),         # [url label] -> label
    (re.compile(r"https?://\S+"), " "),
]
_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_WORD = re.compile(r"[a-z]+")


def clean_wiki(markup: str) -> str:
    """Article text of one page's wiki markup: templates (innermost first), tables,
    references, tags, files and categories removed, links replaced by their labels."""
    text = html.unescape(html.unescape(markup))
    while True:
        text, hits = _TEMPLATE.subn(" ", text)
        if not hits:
            break
    for pattern, repl in _MARKUP:
        text = pattern.sub(repl, text)
    return text


def tokenize(text: str) -> list:
    """Lower-case runs of the letters a–z (the convention of the analogy question set)."""
    return _WORD.findall(text.lower())


def wiki_tokens(path) -> list:
    """The tokens of every article (namespace 0, no redirects) of a MediaWiki XML dump
    (``.xml`` or ``.xml.bz2``), in page order."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"no wiki dump at {str(path)!r}")
    opener = bz2.open if path.suffix == ".bz2" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        dump = fh.read()
    tokens = []
    for page in _PAGE.findall(dump):
        if not _NS0.search(page) or "<redirect" in page:
            continue
        text = _TEXT.search(page)
        if text:
            tokens.extend(tokenize(clean_wiki(text.group(1))))
    return tokens


@dataclass(frozen=True)
class Vocabulary:
    """The ``size`` most frequent words of a corpus (ties broken alphabetically), with
    their counts; ``ids`` maps the corpus to word indices, −1 for words outside."""

    words: tuple
    counts: np.ndarray

    @classmethod
    def build(cls, tokens, size: int) -> "Vocabulary":
        size = check_int(size, "size", 2)
        freq = Counter(tokens)
        if len(freq) < size:
            raise SpecError(f"size = {size} exceeds the {len(freq)} distinct words of the corpus")
        top = sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[:size]
        counts = np.array([c for _, c in top], dtype=np.int64)
        counts.setflags(write=False)
        return cls(tuple(w for w, _ in top), counts)

    def __len__(self) -> int:
        return len(self.words)

    @property
    def index(self) -> dict:
        return {w: i for i, w in enumerate(self.words)}

    def ids(self, tokens) -> np.ndarray:
        index = self.index
        return np.array([index.get(t, -1) for t in tokens], dtype=np.int64)


@dataclass(frozen=True)
class CBOWBatch:
    """One step's examples: ``context`` (B, 2·window) word indices, −1 where unused;
    ``target`` (B,); ``negatives`` (B, k) with ``weights`` (B, k): 1, or 0 where the
    draw equals the target (skipped)."""

    context: np.ndarray
    target: np.ndarray
    negatives: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return len(self.target)

    def context_weights(self) -> np.ndarray:
        """1/|context_b| per example: the weight of each context word in ξ_b, the mean of
        their one-hot vectors."""
        return 1.0 / (self.context >= 0).sum(axis=1)

    def dense(self, V: int) -> tuple:
        """(X, Y) for the generic engines: X the context means of one-hot vectors (B, V),
        Y the ``sgns`` targets (+1 at the target word, −m at a word drawn m times as a
        negative; losses.py)."""
        B = len(self)
        X = np.zeros((B, V))
        rows = np.repeat(np.arange(B), self.context.shape[1])
        used = self.context.reshape(-1) >= 0
        np.add.at(X, (rows[used], self.context.reshape(-1)[used]),
                  np.repeat(self.context_weights(), self.context.shape[1])[used])
        Y = np.zeros((B, V))
        Y[np.arange(B), self.target] = 1.0
        k = self.negatives.shape[1]
        np.add.at(Y, (np.repeat(np.arange(B), k), self.negatives.reshape(-1)),
                  -self.weights.reshape(-1))
        return X, Y


@dataclass(frozen=True)
class CBOWStream:
    """The CBOW examples of a corpus over ``epochs`` passes, ``batch_size`` per step
    (an incomplete last batch of a pass dropped); deterministic for a ``seed``, so a
    finite network and its limit see the same batches.  See the module docstring for
    the sampling rules."""

    ids: np.ndarray
    vocab_size: int
    noise: np.ndarray
    keep: np.ndarray
    window: int
    negatives: int
    batch_size: int
    epochs: int
    seed: int

    @classmethod
    def of(cls, vocab: Vocabulary, tokens, window: int = 5, negatives: int = 5,
           batch_size: int = 256, epochs: int = 1, sample: float = 1e-3,
           seed: int = 0) -> "CBOWStream":
        ids = vocab.ids(tokens)
        ids = ids[ids >= 0]
        if len(ids) < 2:
            raise SpecError("the corpus has fewer than 2 words of the vocabulary")
        if not (isinstance(sample, (int, float)) and sample >= 0):
            raise SpecError(f"sample = {sample!r} must be a number >= 0 (0: no subsampling)")
        counts = np.bincount(ids, minlength=len(vocab)).astype(np.float64)
        noise = counts ** 0.75
        noise /= noise.sum()
        with np.errstate(divide="ignore"):
            sN = sample * len(ids)
            keep = np.where(counts > 0, (np.sqrt(counts / sN) + 1) * sN / counts, 1.0) \
                if sample > 0 else np.ones(len(vocab))
        return cls(ids, len(vocab), noise, np.minimum(keep, 1.0),
                   check_int(window, "window"), check_int(negatives, "negatives"),
                   check_int(batch_size, "batch_size"), check_int(epochs, "epochs"),
                   check_int(seed, "seed", 0))

    def steps_per_epoch(self) -> int:
        """Batches in one pass: the expected kept words over ``batch_size`` (the exact
        count varies with the subsampling draw; :meth:`batches` stops at this many)."""
        expected = float(self.keep[self.ids].sum())
        return max(1, int(expected * 0.98) // self.batch_size)

    @property
    def steps(self) -> int:
        return self.steps_per_epoch() * self.epochs

    def batches(self) -> Iterator[CBOWBatch]:
        rng = np.random.default_rng(self.seed)
        per = self.steps_per_epoch()
        w, B = self.window, self.batch_size
        offsets = np.concatenate([np.arange(-w, 0), np.arange(1, w + 1)])
        for _ in range(self.epochs):
            kept = self.ids[rng.random(len(self.ids)) < self.keep[self.ids]]
            N = len(kept)
            half = rng.integers(1, w + 1, size=N)
            pos = np.arange(N)[:, None] + offsets[None, :]
            use = (np.abs(offsets)[None, :] <= half[:, None]) & (pos >= 0) & (pos < N)
            context = np.where(use, kept[np.clip(pos, 0, N - 1)], -1)
            has = use.any(axis=1)
            context, target = context[has], kept[has]
            neg = rng.choice(self.vocab_size, size=(len(target), self.negatives), p=self.noise)
            weights = (neg != target[:, None]).astype(np.float64)
            for s in range(min(per, len(target) // B)):
                rows = slice(s * B, (s + 1) * B)
                yield CBOWBatch(context[rows], target[rows], neg[rows], weights[rows])
