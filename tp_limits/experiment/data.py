"""Data for experiment files: built-in generators, inline arrays and NumPy files.

Generators (all deterministic for a given ``seed``):

* ``teacher``: inputs uniform on the unit sphere S^{d_in - 1}; targets
  y_k = sin(2 u_k·ξ) + noise·ε with fixed random unit vectors u_k — a smooth
  regression task whose inputs have O(1) norm, as the limit theory assumes;
* ``blobs``: d_out classes with centres on the unit sphere, inputs
  centre + noise·ε, integer labels (for ``xent``);
* ``d1``: data D1 of docs/theory.md §9, repeated to fill the steps;
* ``digits``: scikit-learn's 8x8 digits of the first ``d_out`` classes
  (:func:`tp_limits.datasets.digits`), the training split in order and the
  first ``n_eval`` test images, with their labels, for evaluation.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .schema import ExperimentError


def _sphere(rng, rows: int, d: int) -> np.ndarray:
    x = rng.standard_normal((rows, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def teacher(rows: int, d_in: int, d_out: int, n_eval: int, noise: float, seed: int):
    """(X, Y, eval_inputs, eval_targets) of the sphere regression task: y = sin(2 U x) plus
    noise on the training inputs, the noise-free teacher on the held-out ones."""
    rng = np.random.default_rng(seed)
    U = _sphere(rng, d_out, d_in)
    X = _sphere(rng, rows, d_in)
    Y = np.sin(2 * X @ U.T) + noise * rng.standard_normal((rows, d_out))
    E = _sphere(rng, n_eval, d_in)
    return X, Y, E, np.sin(2 * E @ U.T)


def blobs(rows: int, d_in: int, classes: int, n_eval: int, noise: float, seed: int):
    """(X, labels, eval_inputs, eval_labels): Gaussian blobs around unit-sphere centres, the
    held-out inputs the centres themselves with their own labels."""
    if classes < 2:
        raise ExperimentError("data.d_out is the number of classes for 'blobs'; it must be >= 2")
    rng = np.random.default_rng(seed)
    centres = _sphere(rng, classes, d_in)
    labels = rng.integers(0, classes, rows)
    X = centres[labels] + noise * rng.standard_normal((rows, d_in))
    held = np.arange(n_eval) % classes
    return X, labels, centres[held], held


def d1(rows: int, d_in: int, d_out: int, n_eval: int, noise: float, seed: int):
    """Data D1 (docs/theory.md §9): ((1,0), 1), ((0.6,0.8), -1), ((1,0), 1), repeated."""
    if (d_in, d_out) != (2, 1):
        raise ExperimentError("data 'd1' has d_in = 2 and d_out = 1; leave those keys out")
    X = np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 0.0]])
    Y = np.array([[1.0], [-1.0], [1.0]])
    reps = -(-rows // 3)
    return np.tile(X, (reps, 1))[:rows], np.tile(Y, (reps, 1))[:rows], \
        np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 1.0]])


def digits(rows: int, d_in: int, d_out: int, n_eval: int, noise: float, seed: int):
    """(X, labels, eval_inputs, eval_labels) from :func:`tp_limits.datasets.digits`."""
    from ..datasets import digits as load
    if not 2 <= d_out <= 10:
        raise ExperimentError(f"data.d_out = {d_out} is the number of digit classes for "
                              "'digits'; it must lie in 2..10")
    data = load(classes=d_out, seed=seed)
    idx = np.arange(rows) % len(data.X_train)
    if n_eval > len(data.X_test):
        raise ExperimentError(f"data.n_eval = {n_eval} exceeds the {len(data.X_test)} test "
                              "images of these classes")
    return (data.X_train[idx], data.y_train[idx], data.X_test[:n_eval],
            data.y_test[:n_eval])


GENERATORS = {"teacher": teacher, "blobs": blobs, "d1": d1, "digits": digits}
DEFAULT_GENERATED_STEPS = 16


def _array(value, key: str, base: Path, section: str = "data") -> np.ndarray:
    if isinstance(value, str):
        path = (base / value).expanduser()
        if path.suffix != ".npy":
            raise ExperimentError(f"{section}.{key} = {value!r}: a file given here must be a "
                                  ".npy array (use data.file for an .npz)")
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ExperimentError(f"{section}.{key}: cannot read {path}: {exc}") from None
    try:
        return np.array(value)
    except (TypeError, ValueError):
        raise ExperimentError(f"{section}.{key} must be a rectangular array of numbers (every "
                              "row the same length)") from None


def load_finetune_data(cfg: dict, base: Path):
    """(X, Y, eval_inputs or None, eval_targets or None, steps) of a validated [finetune]
    section's second task: the data generator's at ``data_seed`` (default data.seed + 1),
    or the section's own arrays."""
    ft, data, routine = cfg["finetune"], cfg["data"], cfg["routine"]
    steps = ft["steps"] if ft["steps"] is not None else routine["steps"]
    if data["generator"] is not None:
        seed = data["seed"] + 1 if ft["data_seed"] is None else ft["data_seed"]
        return load_data(dict(data, seed=seed), dict(routine, steps=steps), base)
    E = None if ft["eval_inputs"] is None else _array(ft["eval_inputs"], "eval_inputs", base,
                                                       "finetune")
    Ye = (None if ft["eval_targets"] is None
          else _array(ft["eval_targets"], "eval_targets", base, "finetune"))
    return (_array(ft["X"], "X", base, "finetune"), _array(ft["Y"], "Y", base, "finetune"), E,
            Ye, steps)


def load_data(data: dict, routine: dict, base: Path):
    """(X, Y, eval_inputs or None, eval_targets or None, steps) from a validated [data] section.

    Relative paths are resolved against ``base`` (the experiment file's folder).
    """
    B = routine["batch_size"]
    steps = routine["steps"]
    if data["generator"] is not None:
        gen = GENERATORS.get(data["generator"])
        if gen is None:
            raise ExperimentError(f"data.generator = {data['generator']!r} is not built in; "
                                  f"choose one of {', '.join(GENERATORS)}")
        steps = steps or DEFAULT_GENERATED_STEPS
        out = gen(steps * B, data["d_in"], data["d_out"], data["n_eval"], data["noise"],
                  data["seed"])
        X, Y, E = out[:3]
        return X, Y, E, (out[3] if len(out) > 3 else None), steps
    if data["file"] is not None:
        path = (base / data["file"]).expanduser()
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError) as exc:
            raise ExperimentError(f"data.file: cannot read {path}: {exc}") from None
        missing = {"X", "Y"} - set(arrays)
        if missing:
            raise ExperimentError(f"data.file {path} must hold arrays X and Y "
                                  f"(missing {sorted(missing)})")
        return (arrays["X"], arrays["Y"], arrays.get("eval_inputs"), arrays.get("eval_targets"),
                steps)
    E = None if data["eval_inputs"] is None else _array(data["eval_inputs"], "eval_inputs", base)
    Ye = (None if data["eval_targets"] is None
          else _array(data["eval_targets"], "eval_targets", base))
    return _array(data["X"], "X", base), _array(data["Y"], "Y", base), E, Ye, steps
