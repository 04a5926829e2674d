"""Real data sets, loaded from packages that ship them: nothing is downloaded.

* :func:`digits` — scikit-learn's bundled 8 × 8 handwritten digits (1797
  images, 10 classes), through the optional extra ``data``
  (``pip install -e ".[data]"``).

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


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def digits(classes: int = 10, test_fraction: float = 0.2, n_train: int | None = None,
           seed: int = 0) -> DataSet:
    """The 8 × 8 digits of scikit-learn: images of the digits 0..classes−1.

    ``test_fraction`` of the images (a fixed permutation of ``seed``) form the
    test split; ``n_train`` keeps only the first that many training images.
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise BackendUnavailableError(
            "tp.datasets.digits needs scikit-learn, which ships the data: "
            "pip install -e \".[data]\" (or pip install scikit-learn)") from None
    classes = check_int(classes, "classes", 2, 10)
    seed = check_seed(seed)
    if not (isinstance(test_fraction, (int, float)) and 0 < test_fraction < 1):
        raise SpecError(f"test_fraction = {test_fraction!r} must lie strictly between 0 and 1")
    raw = load_digits()
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
    mean, std = X[train].mean(axis=0), X[train].std(axis=0)
    std = np.where(std > 0, std, 1.0)                 # constant pixels stay 0
    scale = np.sqrt(X.shape[1])
    Z = (X - mean) / std / scale
    return DataSet("digits", _readonly(Z[train]), _readonly(y[train]), _readonly(Z[test]),
                   _readonly(y[test]), classes)
