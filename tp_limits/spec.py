"""The problem description shared by every engine: :class:`MLP` and :class:`Routine`.

Both are frozen and validated on construction, so an engine never starts on
inconsistent input.  Conventions are those of docs/theory.md §0.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .abc.parametrization import ABC
from .errors import SpecError
from .losses import get_loss
from .nonlinearities import Nonlinearity, get_nonlinearity


def check_int(value, name: str, minimum: int = 1) -> int:
    """``value`` as an int, or a SpecError saying it must be an int >= minimum."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise SpecError(f"{name} = {value!r} must be an int >= {minimum}")
    return int(value)


def _finite_positive(value, name: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"{name} = {value!r} must be a number") from None
    if not (math.isfinite(x) and x > 0):
        raise SpecError(f"{name} = {value!r} must be a positive finite number")
    return x


def _finite_nonzero(value, name: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"{name} = {value!r} must be a number") from None
    if not math.isfinite(x) or x == 0:
        raise SpecError(f"{name} = {value!r} must be a finite nonzero number")
    return x


def _per_layer(values, name: str, L1: int) -> tuple:
    if values is None:
        return (1.0,) * L1
    if isinstance(values, numbers.Real):
        return (_finite_positive(values, name),) * L1
    vals = list(values)
    if len(vals) != L1:
        raise SpecError(f"{name} has {len(vals)} entries; give one per layer 1..L+1 ({L1})")
    return tuple(_finite_positive(v, f"{name}[{i}]") for i, v in enumerate(vals))


@dataclass(frozen=True, init=False)
class MLP:
    """An MLP with an abc-parametrization and width-independent constants.

    f(ξ) = α W^{L+1} φ(W^L ... φ(W^1 ξ)), W^l = n^{-a_l} w^l,
    w^l ~ N(0, σ_l² n^{-2 b_l}), learning rate of layer l = η · lr_mult_l · n^{-c_l}.

    ``sigma`` (σ_l) and ``lr_mult`` are per-layer constants (scalar or L+1
    values); ``readout_multiplier`` is α.  ``output_scale`` s is the
    init-scale knob of docs/theory.md §7.3: every σ_l is multiplied by s and
    the output by s^{-(L+1)}.  For positively homogeneous φ (relu, id),
    training with learning rate s² η then reproduces the s = 1 training
    exactly, whatever s.
    """

    param: ABC
    d_in: int
    d_out: int
    phi: str
    sigma: tuple
    lr_mult: tuple
    readout_multiplier: float
    output_scale: float

    def __init__(self, param: ABC, d_in: int, d_out: int = 1, phi: str = "tanh", sigma=None,
                 lr_mult=None, readout_multiplier: float = 1.0, output_scale: float = 1.0):
        if not isinstance(param, ABC):
            raise SpecError(f"param must be a tp.ABC (e.g. tp.mup(2)), got {type(param).__name__}")
        if param.is_symbolic:
            raise SpecError(f"param has free symbols {sorted(map(str, param.free_symbols))}; "
                            "fix them with param.subs(...) before building a network")
        get_nonlinearity(phi)
        L1 = param.L + 1
        object.__setattr__(self, "param", param)
        object.__setattr__(self, "d_in", check_int(d_in, "d_in"))
        object.__setattr__(self, "d_out", check_int(d_out, "d_out"))
        object.__setattr__(self, "phi", phi)
        object.__setattr__(self, "sigma", _per_layer(sigma, "sigma", L1))
        object.__setattr__(self, "lr_mult", _per_layer(lr_mult, "lr_mult", L1))
        object.__setattr__(self, "readout_multiplier",
                           _finite_nonzero(readout_multiplier, "readout_multiplier"))
        object.__setattr__(self, "output_scale", _finite_positive(output_scale, "output_scale"))

    @property
    def L(self) -> int:
        return self.param.L

    @property
    def nonlinearity(self) -> Nonlinearity:
        return get_nonlinearity(self.phi)

    @property
    def effective_sigma(self) -> tuple:
        """σ_l · s: the init constants actually used."""
        return tuple(s * self.output_scale for s in self.sigma)

    @property
    def output_multiplier(self) -> float:
        """α · s^{-(L+1)}: the factor in front of W^{L+1} x^L."""
        return self.readout_multiplier * self.output_scale ** (-(self.L + 1))

    def init_exponents(self) -> tuple:
        """Exact a_l + b_l per layer (Fraction, or inf for a zero readout)."""
        a, b, _ = self.param._fractions
        return tuple(x + y for x, y in zip(a, b))

    def lr_exponents(self) -> tuple:
        """Exact exponent of n in the W-space learning rate: 2a_l + c_l (SGD)."""
        a, _, c = self.param._fractions
        return tuple(2 * x + y for x, y in zip(a, c))


def distinct_rows(A: np.ndarray) -> np.ndarray:
    """The distinct rows of A in order of first appearance (rows compared bit for bit)."""
    seen = {}
    for i, row in enumerate(A):
        seen.setdefault(row.tobytes(), i)
    return A[sorted(seen.values())]


def _as_matrix(a, name: str, dtype=np.float64) -> np.ndarray:
    try:
        arr = np.array(a, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{name} must be a numeric array ({exc})") from None
    if arr.ndim != 2:
        raise SpecError(f"{name} must be 2-D (rows = examples), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise SpecError(f"{name} contains NaN or inf (first at row {bad[0]}, column {bad[1]})")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, init=False)
class Routine:
    """A training routine: data consumed in order, mean loss, SGD steps.

    ``X`` has shape (T·B, d_in); step t uses rows t·B … t·B+B−1.  ``Y`` has
    shape (T·B, d_out) (``mse``; a 1-D Y means d_out = 1) or holds integer
    class labels / one-hot rows (``xent``).  ``steps`` defaults to
    len(X) // B.  ``eval_inputs`` (E, d_in) defaults to the distinct training
    inputs in order of first appearance.
    """

    X: np.ndarray
    Y: np.ndarray
    lr: float
    loss: str
    batch_size: int
    steps: int
    eval_inputs: np.ndarray

    def __init__(self, X, Y, lr: float, loss: str = "mse", batch_size: int = 1, steps=None,
                 eval_inputs=None):
        get_loss(loss)
        X = _as_matrix(X, "X")
        B = check_int(batch_size, "batch_size")
        Y = self._targets(Y, loss, len(X))
        if steps is None:
            if len(X) % B:
                raise SpecError(f"len(X) = {len(X)} is not a multiple of batch_size = {B}; "
                                "pass steps= to use only the first steps*B rows")
            steps = len(X) // B
        steps = check_int(steps, "steps")
        if steps * B > len(X):
            raise SpecError(f"steps * batch_size = {steps * B} exceeds the {len(X)} rows of X")
        if eval_inputs is None:
            eval_inputs = distinct_rows(X[: steps * B])
        E = _as_matrix(eval_inputs, "eval_inputs")
        if E.shape[1] != X.shape[1]:
            raise SpecError(f"eval_inputs have dimension {E.shape[1]} but X has {X.shape[1]}")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "Y", Y)
        object.__setattr__(self, "lr", _finite_positive(lr, "lr"))
        object.__setattr__(self, "loss", loss)
        object.__setattr__(self, "batch_size", B)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "eval_inputs", E)

    @staticmethod
    def _targets(Y, loss: str, n: int) -> np.ndarray:
        arr = np.asarray(Y)
        if loss == "xent" and arr.ndim in (1, 2) and (arr.ndim == 1 or arr.shape[1] == 1) \
                and np.issubdtype(arr.dtype, np.integer):
            labels = arr.reshape(-1)
            if labels.min(initial=0) < 0:
                raise SpecError("xent class labels must be >= 0")
            out = labels.astype(np.int64)
            out.setflags(write=False)
        else:
            if arr.ndim == 1:
                arr = arr[:, None]
            out = _as_matrix(arr, "Y")
            if loss == "xent" and not (np.all((out == 0) | (out == 1))
                                       and np.all(out.sum(axis=1) == 1)):
                raise SpecError("xent targets must be integer labels or one-hot rows")
        if len(out) != n:
            raise SpecError(f"Y has {len(out)} rows but X has {n}")
        return out

    @property
    def d_in(self) -> int:
        return self.X.shape[1]

    def targets(self, d_out: int) -> np.ndarray:
        """Targets as a float (rows, d_out) matrix (one-hot for class labels)."""
        if self.Y.ndim == 1:
            if self.Y.max(initial=0) >= d_out:
                raise SpecError(f"class label {int(self.Y.max())} needs d_out > {int(self.Y.max())}, "
                                f"but the network has d_out = {d_out}")
            return np.eye(d_out)[self.Y]
        if self.Y.shape[1] != d_out:
            raise SpecError(f"Y has {self.Y.shape[1]} columns but the network has d_out = {d_out}")
        return np.asarray(self.Y)

    def batch(self, t: int) -> slice:
        return slice(t * self.batch_size, (t + 1) * self.batch_size)


def check_compatible(net: MLP, routine: Routine) -> np.ndarray:
    """Raise SpecError if ``routine`` does not fit ``net``; return its target matrix."""
    if routine.d_in != net.d_in:
        raise SpecError(f"X has {routine.d_in} columns but the network has d_in = {net.d_in}")
    return routine.targets(net.d_out)

