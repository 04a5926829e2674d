"""The optimizer protocol: what every engine asks of an optimizer (docs/theory.md §10).

An optimizer is a frozen dataclass of width-free hyperparameters, each declared
with :func:`hyperparameter` (its check, its one-line doc and its experiment-file
key), that fills this protocol in one module (sgd.py, adam.py):

* ``name`` — its name in routines and experiment files; ``exponents`` — the width
  rule of the classifier it follows (abc/update_rules.py): a parametrization built
  for another rule is refused;
* traits the engines branch on, never on the name: ``plain`` (the update is −γ∇,
  no state), ``linear`` (a linear filter of the gradients: momentum schedules,
  exact engines, kernel regime);
* ``rule`` — a :class:`CoordinateRule`: how one coordinate moves (a particle's
  Z^U, Z^{nV} entries, an exact engine's coefficient, a kernel-regime value),
  written once as a scalar function that Numba inlines, NumPy applies to arrays
  and the CUDA source is generated from; :meth:`Optimizer.coordinate` gives its
  inputs for one step;
* :meth:`Optimizer.finite_step` — the width-n update of one weight matrix;
* :meth:`Optimizer.schedule` — for a linear optimizer, the scalar coefficients of
  W_t = ρ_t W_0 − Σ_s C[t, s] γ G_s that the deep engines use, derived from the
  rule itself; :meth:`Optimizer.direction` — for one that is not, the entrywise step
  the deep engine's partner particles apply (docs/theory.md §10.6);
* :meth:`Optimizer.kernel_refusal` — why the kernel regime cannot follow it, or None.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np

from ..checks import finite_non_negative

#: kinds of a hyperparameter's experiment-file value (experiment/schema.py checks them)
TOML_KINDS = ("number", "numbers", "bool", "int", "str", "int|str")


def hyperparameter(default, check: Callable, doc: str, toml: str | None = None,
                   kind: str = "number"):
    """A dataclass field of an optimizer: ``check(value, name)`` cleans or refuses a value
    (spec/checks.py), ``doc`` is its one-line description, ``toml`` its key in an
    experiment file's [routine] section (default: its name) and ``kind`` the TOML type."""
    assert kind in TOML_KINDS
    return dataclasses.field(default=default, metadata={"check": check, "doc": doc,
                                                         "toml": toml, "kind": kind})


def hyperparameters(cls) -> tuple:
    """The declared hyperparameters of an optimizer class: (field name, TOML key, kind,
    default, doc), in declaration order."""
    return tuple((f.name, f.metadata.get("toml") or f.name, f.metadata["kind"], f.default,
                  f.metadata["doc"]) for f in dataclasses.fields(cls) if "doc" in f.metadata)


@dataclass(frozen=True)
class CoordinateRule:
    """How one coordinate z moves in one step (docs/theory.md §10.2, §10.5).

    ``step(z, g, *slots, h)`` returns ``(z, *slots)`` after the step; ``g`` is what the
    optimizer is fed (:meth:`Optimizer.coordinate`: the plain-SGD increment γ∇, or
    the gradient in the units of Adam's ε), ``slots`` the coordinate's state (named
    by ``slots``, zero before the first step) and ``h`` the step's hyperparameters, a
    ``Hyper`` record with the fields ``hyper``.  ``step`` None is the plain rule
    z ← z − g, which kernels apply where the increment is formed.  ``step`` is
    written with ``+ - * /``, comparisons and elementwise.py's helpers, so it runs
    on arrays and scalars alike, inside Numba kernels, and as generated CUDA.
    ``Hyper`` is a NamedTuple class defined at the top level of the rule's module: its
    fields are the layout of the hyperparameters, by name in Python and Numba, in this
    order in the array the CUDA kernel reads (and compiled kernels that take one are
    cached by it).
    """

    name: str
    slots: tuple
    hyper: tuple
    step: Callable | None
    Hyper: type

    @property
    def plain(self) -> bool:
        return self.step is None

    def apply(self, z, g, state: tuple, h) -> tuple:
        """(z', state') for arrays (or numbers) z, g and state (one array per slot)."""
        if self.step is None:
            return z - g, state
        out = self.step(z, g, *state, h)
        return out[0], tuple(out[1:])

    def zeros(self, like) -> tuple:
        """A fresh state: one zero array like ``like`` per slot."""
        return tuple(np.zeros_like(like) for _ in self.slots)


#: every coordinate rule by name, in the order they were defined: a rule's position is
#: its code in the compiled kernels (a kernel is cached on disk per code, so rules are
#: only ever added at the end)
RULES: dict = {}


def coordinate_rule(name: str, slots: tuple, Hyper: type, step: Callable | None
                    ) -> CoordinateRule:
    """Define and register a rule (see :class:`CoordinateRule`)."""
    if name in RULES:
        raise ValueError(f"a coordinate rule called {name!r} is already registered")
    rule = CoordinateRule(name, tuple(slots), tuple(Hyper._fields), step, Hyper)
    RULES[name] = rule
    return rule


def rule_code(rule: CoordinateRule) -> int:
    return list(RULES).index(rule.name)


def rule_of_code(code: int) -> CoordinateRule:
    return list(RULES.values())[code]


class Optimizer:
    """Base of the optimizers; subclasses are frozen dataclasses (see the module docstring)."""

    name: ClassVar[str] = ""
    exponents: ClassVar[str] = ""
    weight_decay: float = 0.0

    def __post_init__(self):
        """Every declared hyperparameter through its check."""
        for f in dataclasses.fields(self):
            check = f.metadata.get("check")
            if check is not None:
                object.__setattr__(self, f.name, check(getattr(self, f.name), f.name))

    # -- traits ----------------------------------------------------------------------------
    @property
    def plain(self) -> bool:
        """The update is −γ∇ itself (no state, no decay)."""
        return self.rule.plain

    @property
    def linear(self) -> bool:
        """The update is a linear filter of the gradients (and of the weights)."""
        raise NotImplementedError

    @property
    def rule(self) -> CoordinateRule:
        raise NotImplementedError

    @property
    def momentum(self) -> float:
        """Heavy-ball momentum μ (0 for optimizers without it)."""
        return 0.0

    @property
    def coordinatewise(self) -> bool:
        """Every coordinate a particle carries moves by the rule alone (the fused one-hidden
        kernel runs it); False when a step needs particle means first (Muon's Gram)."""
        return True

    @property
    def exact_linear(self) -> bool:
        """The exact linear engines can follow it: each update is a linear map of the
        particles' coordinates once their moments are known (a linear filter of the
        gradients; Muon's D S^{−1/2}), so coefficient vectors over Gaussian primitives move
        as the particles do.  False for an entrywise nonlinear rule (Adam), which moves
        each particle by a nonlinear function of its own gradient."""
        return self.linear

    @property
    def pair_matrix(self) -> bool:
        """Whether a hidden matrix moves by a matrix function of its buffer (Muon's msign), so
        that the deep engines follow it by a coefficient matrix Ω over the stored pairs,
        W_t = ρ_t W_0 − (1/n) Pᵀ Ω_t Q (:meth:`move_pairs`).  Otherwise a linear optimizer
        moves it by its :meth:`schedule`, an entrywise nonlinear one (Adam) by partner
        particles (:meth:`direction`)."""
        return False

    @property
    def dense_transform(self) -> bool:
        """Whether a finite hidden matrix moves by a matrix function of a dense direction
        (an SVD or Newton–Schulz at n × n per step: SpectralUpdate over Adam)."""
        return False

    @property
    def partners(self) -> bool:
        """Whether the deep engines follow a hidden matrix by partner particles: an update
        entrywise and not linear in the gradients (docs/theory.md §10.6)."""
        return not (self.linear or self.pair_matrix)

    def shrinks(self, decay) -> tuple:
        """δ_l = η_l λ, the per-step shrink of each layer (``decay[l]`` = η_l = η lr_mult_l;
        docs/theory.md §10.1)."""
        return tuple(lr * self.weight_decay for lr in decay)

    # -- one coordinate --------------------------------------------------------------------
    def coordinate(self, lr: float, alpha: float, shrink: float, t: int,
                   rate: float = 1.0) -> tuple:
        """(scale, hyper) for the t-th update (t = 1, 2, ...) of a coordinate with learning
        rate ``lr`` (η_l e_l), shrink δ and output multiplier ``alpha`` inside its gradient,
        at the factor ``rate`` = η_t / η of a learning-rate schedule (docs/theory.md §10.9):
        the rule is fed ``g = scale · Σ`` with Σ the coordinate's raw gradient sum, and
        ``hyper`` (a ``rule.Hyper``)."""
        raise NotImplementedError

    # -- the finite network ----------------------------------------------------------------
    def finite_state(self, W, l: int, layers: int, backend) -> tuple:
        """Layer ``l``'s state (of ``layers``) at the start: one zero array like W per rule
        slot (momentum buffer, Adam's moments)."""
        return tuple(backend.xp.zeros_like(W) for _ in self.rule.slots)

    def finite_state_bytes(self, shape, l: int, layers: int, B: int, T: int,
                           itemsize: int) -> float:
        """Bytes of layer ``l``'s state (of ``layers``) over a run of T steps of batch B."""
        return len(self.rule.slots) * shape[0] * shape[1] * itemsize

    @classmethod
    def for_exponents(cls, kind: str):
        """The optimizer of this class with its defaults that follows the width rule ``kind``
        (None if none does)."""
        return cls() if cls.exponents == kind else None

    def finite_step(self, W, state: tuple, G, X, const, l: int, t: int, backend,
                    rate: float = 1.0) -> None:
        """Move layer ``l``'s weights W (in place) by the t-th update, for the W-gradient
        Gᵀ X (G (B, n_out), X (B, n_in)); ``state``: one array like W per rule slot;
        ``const``: the network's FiniteConstants (docs/theory.md §7.1); ``rate``: the
        schedule's factor η_t / η of this update (docs/theory.md §10.9)."""
        raise NotImplementedError

    # -- the coordinates a particle carries (Z^U, Z^{nV}) -----------------------------------
    def particle_state(self, Z, layer: str) -> tuple:
        """The state beside particle coordinates Z (N, k) of the input layer or the readout
        (``layer``: 'input' or 'readout'): one zero array like Z per rule slot."""
        return self.rule.zeros(Z)

    def move_particles(self, Z, state, left, right, lr, alpha, shrink, t, rate, layer,
                       moments=None):
        """(Z', state') after the t-th update of particle coordinates Z (N, k) whose gradient
        rows are left @ right ((N, B) @ (B, k)), with ``alpha`` inside the gradient: the
        coordinate rule, fed (scale · left) @ right.  ``moments(A, B)`` = E[Aᵀ B] over the
        particles (default: the mean over the rows; the exact engines pass their Gaussian
        primitives' covariance), for rules that need particle means."""
        scale, h = self.coordinate(lr, alpha, shrink, t, rate)
        return self.rule.apply(Z, scale * left @ right, state, h)

    # -- deep hidden matrices ---------------------------------------------------------------
    def schedule(self, shrink: float, T: int, rates=None, counts=None):
        """(ρ, C): W_t = ρ_t W_0 − Σ_{s<t} C[t, s] γ G_s under this linear optimizer with
        shrink δ and the learning-rate factors ``rates`` (T values; None: constant), γ the
        base step (docs/theory.md §10.2, §10.9).  ρ (T+1,), C (T+1, T), C[t, s] = 0 for
        s >= t.  ``counts`` (T update counts, spec/phases.py; None: every step trains) leaves
        W where it is at a step with count 0: C[·, s] = 0 there and ρ does not move
        (docs/theory.md §10.10).

        Derived from the rule: W is linear in (W_0, γG_0, γG_1, ...), so the rule
        applied to W's coefficient vector w = (ρ_t, −C[t, 0], …) with the step's
        gradient the unit vector of γG_t moves it exactly as it moves the weights.
        """
        if not self.linear:
            raise TypeError(f"{self} is not linear in the gradients: it has no schedule")
        w = np.zeros(T + 1)
        w[0] = 1.0
        state = self.rule.zeros(w)
        rho, C = np.ones(T + 1), np.zeros((T + 1, T))
        for t, rate, k in _steps(rates, counts, T):
            if k:
                scale, h = self.coordinate(1.0, 1.0, shrink, k, rate)
                g = np.zeros(T + 1)
                g[1 + t] = scale
                w, state = self.rule.apply(w, g, state, h)
            rho[t + 1], C[t + 1] = w[0], -w[1:]
        return rho, C

    def init_factor(self, shrink: float, T: int, rates=None, counts=None) -> np.ndarray:
        """ρ_t, t = 0..T: the factor on W_0 in W_t, which only the decay moves (the rule
        applied to z = 1 with zero gradients; not at a frozen step of ``counts``).  For a
        linear optimizer it is the ρ of :meth:`schedule`."""
        z, state = np.ones(1), self.rule.zeros(np.ones(1))
        rho = np.ones(T + 1)
        for t, rate, k in _steps(rates, counts, T):
            if k:
                _, h = self.coordinate(1.0, 1.0, shrink, k, rate)
                z, state = self.rule.apply(z, np.zeros(1), state, h)
            rho[t + 1] = z[0]
        return rho

    def move_pairs(self, omega, GP, GQ, t: int, B: int, rate: float, lr: float,
                   shrink: float, xp=np, counts=None) -> None:
        """Ω ← (1 − s δ) Ω + s η_l K̂ for a hidden matrix after update t (0-based), K̂ the
        matrix function of its buffer over the stored pairs whose limit Gram matrices are
        G_P (backward vectors) and G_Q (forward vectors): the :attr:`pair_matrix`
        optimizers' part of the protocol (docs/theory.md §11.4); ``counts`` the matrix's
        update counts under a routine's phases (§10.10)."""
        raise TypeError(f"{self} moves a hidden matrix by its schedule or by partners, "
                        "not by a coefficient matrix over stored pairs")

    def direction(self, state: tuple, g, t: int, xp, eps: float | None = None):
        """The entrywise step ψ of an optimizer that is not linear, after folding the
        gradient entries ``g`` into ``state`` (updated in place) at its t-th update."""
        raise TypeError(f"{self} is linear in the gradients: it moves by its schedule")

    def limit_refusal(self, net) -> str | None:
        """Why no engine computes this optimizer's infinite-width limit for the network
        ``net``, or None (every regime's own conditions are checked apart,
        :meth:`kernel_refusal`)."""
        return None

    def kernel_refusal(self, regime: str) -> str | None:
        """Why the limit of this optimizer in the kernel (or trivial) regime is not kernel
        gradient descent, or None when it is (docs/theory.md §10.4)."""
        if not self.linear:
            return (f"{self} in the {regime} regime: its update is not linear in the "
                    "gradients, which makes the limit a nonlinear kernel dynamics, not "
                    "built (docs/theory.md §10.4); use a feature-learning parametrization "
                    f"(e.g. tp.mup(L, optimizer={self.exponents!r}))")
        if self.weight_decay:
            return (f"weight decay in the {regime} regime: decay shrinks W_0 by a Θ(1) "
                    "factor, so f leaves its linearization at init and the limit is not "
                    "kernel gradient descent (docs/theory.md §10.4); use weight_decay=0 "
                    "(momentum is supported) or a feature-learning parametrization")
        return None

    def __str__(self):
        """``SGD(momentum=0.9, weight_decay=0)``: every hyperparameter but a flag left at its
        default False (so that adding a flag leaves the runs' recorded names as they were)."""
        args = ", ".join(f"{name}={_fmt(getattr(self, name))}"
                         for name, _, kind, default, _ in hyperparameters(type(self))
                         if not (kind == "bool" and default is False
                                 and getattr(self, name) is False))
        return f"{type(self).__name__}({args})"


def _steps(rates, counts, T: int):
    """(t, s_t, k_t) for t = 0 … T−1: the schedule's factor and the update count (0: the
    parameter is frozen at step t; every step is the (t+1)-th update without ``counts``)."""
    s = np.ones(T) if rates is None else np.asarray(rates, dtype=np.float64)
    k = np.arange(1, T + 1) if counts is None else np.asarray(counts)
    return ((t, float(s[t]), int(k[t])) for t in range(T))


def _fmt(v) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt(x) for x in v) + ")"
    return f"{v:g}" if isinstance(v, float) else repr(v)


def decay_field():
    """The weight-decay hyperparameter every optimizer shares (docs/theory.md §10.1)."""
    return hyperparameter(0.0, finite_non_negative,
                          "width-free weight decay λ: a shrink of η_l λ per step")
