"""Real data sets, loaded from packages that ship them: nothing is downloaded.

* :func:`digits` — scikit-learn's bundled 8 × 8 handwritten digits (1797
  images, 10 classes), through the optional extra ``data``
  (``pip install -e ".[data]"``).
* :func:`digits_fewshot` — few-shot pools over the digits under the 8 symmetries of the
  square (80 classes), for first-order MAML (tasks/maml.py).
* :func:`wiki_excerpt`, :func:`analogy_questions` — the Wikipedia excerpt (about 0.6 M
  words) and the 19,544 word-analogy questions that gensim ships as test data, through the
  optional extra ``text`` (``pip install -e ".[text]"``; gensim is not imported, only its
  data files are read).

Inputs are standardized with the training split's per-pixel mean and
standard deviation and divided by √d, so an input has norm about 1: the
scale at which the infinite-width theory's fixed-d inputs live (a 64-pixel
vector of unit-variance pixels would put tanh's pre-activations at variance
64 with σ_1 = 1).  The train/test split is a fixed permutation of ``seed``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .engine.options import check_seed
from .errors import BackendUnavailableError, SpecError
from .spec import Routine
from .spec.checks import check_int


@dataclass(frozen=True)
class DataSet:
    """A labelled data set with a fixed train/test split (arrays are read-only)."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    classes: int

    @property
    def d_in(self) -> int:
        return self.X_train.shape[1]

    def routine(self, lr: float, batch_size: int = 8, steps: int | None = None,
                n_eval: int | None = None, loss: str = "xent", optimizer=None) -> Routine:
        """A Routine that trains on the training split in order (cycling through it when
        steps · batch_size exceeds it) and evaluates, with targets, on the first
        ``n_eval`` test points (default all); ``optimizer`` as in :class:`Routine`."""
        B = check_int(batch_size, "batch_size")
        n = len(self.X_train)
        if steps is None and B > n:
            raise SpecError(f"batch_size = {B} exceeds the {n} training images: one pass "
                            "has no full batch; lower batch_size or give steps= (the batches "
                            "then cycle through the images)")
        steps = n // B if steps is None else check_int(steps, "steps")
        rows = np.arange(steps * B) % n
        n_eval = len(self.X_test) if n_eval is None else check_int(n_eval, "n_eval")
        if n_eval > len(self.X_test):
            raise SpecError(f"n_eval = {n_eval} exceeds the {len(self.X_test)} test points")
        if loss == "xent":
            Y, Ye = self.y_train[rows], self.y_test[:n_eval]
        else:                                         # regression on one-hot targets
            eye = np.eye(self.classes)
            Y, Ye = eye[self.y_train[rows]], eye[self.y_test[:n_eval]]
        return Routine(self.X_train[rows], Y, lr=lr, loss=loss, batch_size=B, steps=steps,
                       eval_inputs=self.X_test[:n_eval], eval_targets=Ye, optimizer=optimizer)


#: gensim's test-data files this module reads
WIKI_EXCERPT = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
ANALOGIES = "questions-words.txt"


def gensim_test_file(name: str):
    """The path of one of gensim's bundled test-data files, found without importing gensim
    (its package folder is located by importlib)."""
    import importlib.util
    from pathlib import Path
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise BackendUnavailableError(
            f"the file {name!r} ships with gensim's test data: pip install -e \".[text]\" "
            "(or pip install gensim; gensim itself is not imported)")
    path = Path(list(spec.submodule_search_locations)[0]) / "test" / "test_data" / name
    if not path.is_file():
        raise BackendUnavailableError(f"this gensim installation has no {path}")
    return path


def wiki_excerpt() -> list:
    """The tokens (lower-case words a–z) of the articles of gensim's Wikipedia excerpt,
    markup removed (tasks/corpus.py)."""
    from .tasks.corpus import wiki_tokens
    return wiki_tokens(gensim_test_file(WIKI_EXCERPT))


def analogy_questions():
    """The word-analogy questions ("a is to b as c is to d", 14 sections) that gensim ships,
    as :class:`~tp_limits.tasks.analogy.Questions`."""
    from .tasks.analogy import Questions
    return Questions.load(gensim_test_file(ANALOGIES))


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def _standardized(X: np.ndarray, fit) -> np.ndarray:
    """(X − mean)/std/√d with the per-pixel mean and std of the rows ``fit`` of X (constant
    pixels stay 0): inputs of norm about 1."""
    mean, std = X[fit].mean(axis=0), X[fit].std(axis=0)
    std = np.where(std > 0, std, 1.0)                 # constant pixels stay 0
    return (X - mean) / std / np.sqrt(X.shape[1])


def _load_digits():
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise BackendUnavailableError(
            "tp.datasets.digits needs scikit-learn, which ships the data: "
            "pip install -e \".[data]\" (or pip install scikit-learn)") from None
    return load_digits()


def digit_transforms(views: int = 8) -> tuple:
    """scikit-learn's 1797 digit images (8 × 8, raw pixel values 0..16) under the first
    ``views`` of the 8 symmetries of the square (identity, the three rotations by 90°, then
    those four after a transpose): (images (views·1797, 8, 8), digit labels, view labels).
    Each (digit, view) pair is a class of its own, as rotated characters are in few-shot
    benchmarks."""
    views = check_int(views, "views", 1, 8)
    raw = _load_digits()
    imgs = raw.images.astype(np.float64)
    out, digit, view = [], [], []
    for v in range(views):
        base = imgs if v < 4 else np.transpose(imgs, (0, 2, 1))
        out.append(np.rot90(base, k=v % 4, axes=(1, 2)))
        digit.append(raw.target)
        view.append(np.full(len(imgs), v))
    return np.concatenate(out), np.concatenate(digit).astype(np.int64), np.concatenate(view)


def digits(classes: int = 10, test_fraction: float = 0.2, n_train: int | None = None,
           seed: int = 0) -> DataSet:
    """The 8 × 8 digits of scikit-learn: images of the digits 0..classes−1.

    ``test_fraction`` of the images (a fixed permutation of ``seed``) form the
    test split; ``n_train`` keeps only the first that many training images.
    """
    classes = check_int(classes, "classes", 2, 10)
    seed = check_seed(seed)
    if not (isinstance(test_fraction, (int, float)) and 0 < test_fraction < 1):
        raise SpecError(f"test_fraction = {test_fraction!r} must lie strictly between 0 and 1")
    raw = _load_digits()
    keep = raw.target < classes
    X, y = raw.data[keep].astype(np.float64), raw.target[keep].astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(X))
    n_test = int(round(test_fraction * len(X)))
    if not 0 < n_test < len(X):
        raise SpecError(f"test_fraction = {test_fraction!r} of {len(X)} images leaves "
                        f"{n_test} for testing and {len(X) - n_test} for training; both "
                        "splits need at least one image")
    test, train = order[:n_test], order[n_test:]
    if n_train is not None:
        train = train[: check_int(n_train, "n_train", 1, len(train))]
    Z = _standardized(X, train)
    return DataSet("digits", _readonly(Z[train]), _readonly(y[train]), _readonly(Z[test]),
                   _readonly(y[test]), classes)


def digits_fewshot(train_digits=(0, 1, 2, 3, 4), views: int = 8, ways: int = 5,
                   shots: int = 1, queries: int = 15, bias: float = 1.0) -> tuple:
    """(meta-train, meta-test) FewShot pools over scikit-learn's digits: every image under
    ``views`` symmetries of the square, each (digit, view) a class (:func:`digit_transforms`),
    pixels standardized over the pool and divided by √64 (as :func:`digits` does);
    the classes of ``train_digits`` for meta-training, those of the other digits for
    meta-testing."""
    from .tasks.maml import FewShot
    imgs, digit, view = digit_transforms(views)
    X = imgs.reshape(len(imgs), -1)
    X = _standardized(X, slice(None))
    label = digit * views + view
    train_digits = sorted({int(d) for d in train_digits})
    if not train_digits or not set(train_digits) < set(range(10)):
        raise SpecError(f"train_digits = {train_digits} must be a proper subset of 0..9")
    train = tuple(d * views + v for d in train_digits for v in range(views))
    test = tuple(d * views + v for d in range(10) if d not in train_digits for v in range(views))
    return (FewShot.of(X, label, train, ways, shots, queries, bias),
            FewShot.of(X, label, test, ways, shots, queries, bias))
