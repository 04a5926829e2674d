"""First-order MAML for the linear one-hidden-layer network, at width n and in its limits
(docs/theory.md §15.5).

A task is a k-shot N-way classification problem: N classes drawn from a pool, labelled
0..N−1 in a random order, k support and q query examples of each.  One meta-step draws
``meta_batch`` tasks; for each, one inner SGD step on the support set's mean
cross-entropy, θ'_τ = θ − η_inner ∇L_S(θ), then the query set's gradient at the adapted
weights, ∇L_Q(θ'_τ); the outer step is θ ← θ − η_outer mean_τ ∇L_Q(θ'_τ) (first order:
the inner step's Jacobian is dropped).  Both steps are the package's SGD in W-space with
the network's per-layer width exponents, so in the pair of matrices of tasks/pair.py
every step is the recursion written there: at width n, in the feature-learning limit
(exact, m = d_in) and in the GP limit (input weights frozen).  Meta-test accuracy: the
mean query accuracy after one inner step on each of a fixed set of test tasks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..engine.progress import progress_bar
from ..engine.status import RunStatus
from ..engine.steps import StepLoop, check_size
from ..errors import SpecError
from ..losses import get_loss
from ..spec.checks import check_choice, check_int, finite_positive
from ..spec.mlp import MLP
from .pair import LIMITS, check_network, initial, rates, width_label, zero_readout_network


def maml_network(param, d_in: int, ways: int, sigma: float = 1.0) -> MLP:
    """The meta-learner: ``param`` (L = 1) with a zero readout, φ = id, d_out = ``ways``.
    An input bias is a constant input coordinate (FewShot adds it)."""
    return zero_readout_network(param, d_in, ways, sigma)


@dataclass(frozen=True)
class Tasks:
    """A draw of tasks: support (count, N·k, d) with labels (count, N·k), query likewise."""

    Xs: np.ndarray
    ys: np.ndarray
    Xq: np.ndarray
    yq: np.ndarray

    def __len__(self) -> int:
        return len(self.Xs)


@dataclass(frozen=True)
class FewShot:
    """k-shot N-way tasks over the examples ``X`` (rows) of the classes ``classes`` of
    ``y``; ``bias`` > 0 appends the constant input coordinate ``bias`` (an input bias)."""

    X: np.ndarray
    y: np.ndarray
    classes: tuple
    ways: int
    shots: int
    queries: int

    @classmethod
    def of(cls, X, y, classes, ways: int = 5, shots: int = 1, queries: int = 15,
           bias: float = 1.0) -> "FewShot":
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y)
        classes = tuple(int(c) for c in classes)
        ways, shots = check_int(ways, "ways", 2), check_int(shots, "shots")
        queries = check_int(queries, "queries")
        if len(classes) < ways:
            raise SpecError(f"{ways}-way tasks need at least {ways} classes, got {classes}")
        for c in classes:
            have = int(np.sum(y == c))
            if have < shots + queries:
                raise SpecError(f"class {c} has {have} examples; shots + queries = "
                                f"{shots + queries} are needed")
        if bias:
            X = np.hstack([X, np.full((len(X), 1), finite_positive(bias, "bias"))])
        keep = np.isin(y, classes)
        return cls(X[keep], y[keep], classes, ways, shots, queries)

    @property
    def d_in(self) -> int:
        return self.X.shape[1]

    def sample(self, rng: np.random.Generator, count: int) -> Tasks:
        """``count`` tasks: classes, their labels' order and the examples drawn by ``rng``."""
        N, k, q = self.ways, self.shots, self.queries
        by_class = {c: np.nonzero(self.y == c)[0] for c in self.classes}
        S, Q = [], []
        for _ in range(count):
            chosen = rng.choice(len(self.classes), size=N, replace=False)
            rows = [rng.choice(by_class[self.classes[i]], size=k + q, replace=False)
                    for i in chosen]
            S.append(np.concatenate([r[:k] for r in rows]))
            Q.append(np.concatenate([r[k:] for r in rows]))
        S, Q = np.array(S), np.array(Q)
        return Tasks(self.X[S], np.tile(np.repeat(np.arange(N), k), (count, 1)),
                     self.X[Q], np.tile(np.repeat(np.arange(N), q), (count, 1)))


@dataclass(frozen=True)
class MAML:
    """First-order MAML's width-free hyperparameters: base rates of the inner and outer
    SGD steps, tasks per meta-step, meta-steps, and the seed of the task draws."""

    inner_lr: float
    outer_lr: float
    meta_batch: int = 16
    steps: int = 200
    seed: int = 0

    def __post_init__(self):
        finite_positive(self.inner_lr, "inner_lr")
        finite_positive(self.outer_lr, "outer_lr")
        check_int(self.meta_batch, "meta_batch")
        check_int(self.steps, "steps")
        check_int(self.seed, "seed", 0)


_XENT = get_loss("xent")


def _xent(f: np.ndarray, labels: np.ndarray) -> tuple:
    """Cross-entropy of outputs f (… × N) at integer labels (…): its values (…) and its
    gradient ∇_f (… × N), by losses.py's ``xent`` on the flattened examples."""
    N = f.shape[-1]
    F, Y = f.reshape(-1, N), np.eye(N)[labels.reshape(-1)]
    return _XENT.value(F, Y, np).reshape(labels.shape), _XENT.grad(F, Y, np).reshape(f.shape)


def _forward(E_in, E_out, X, alpha) -> tuple:
    """(H, f) = (X E_in, α H E_outᵀ) for each task's inputs X (tasks × B × d); E_in and E_out
    shared (d × m, N × m) or one pair per task (tasks × d × m, tasks × N × m)."""
    H = X @ E_in
    return H, alpha * (H @ np.swapaxes(E_out, -1, -2))


def _gradients(E_out, X, H, f, labels, alpha) -> tuple:
    """Per task: the query losses (tasks × B), and the gradients of the task's mean
    cross-entropy with respect to E_in and E_out (tasks × d × m, tasks × N × m)."""
    value, grad = _xent(f, labels)
    chi = grad / X.shape[1]
    g_in = alpha * np.swapaxes(X, -1, -2) @ (chi @ E_out)
    g_out = alpha * np.swapaxes(chi, -1, -2) @ H
    return value, g_in, g_out


def adapt(E_in, E_out, X, labels, lr_in, lr_out, alpha):
    """One SGD step per task on the mean cross-entropy of (X, labels) (tasks × B × d):
    the adapted pairs (tasks × d × m, tasks × N × m)."""
    H, f = _forward(E_in, E_out, X, alpha)
    _, g_in, g_out = _gradients(E_out, X, H, f, labels, alpha)
    return E_in - lr_in * g_in, E_out - lr_out * g_out


def query_outputs(E_in, E_out, X, alpha):
    """f on each task's inputs X (tasks × B × d) with its own pair."""
    return _forward(E_in, E_out, X, alpha)[1]


def meta_step(E_in, E_out, tasks: Tasks, inner: tuple, outer: tuple, alpha: float,
              step: int = 0, bound: float | None = 1e10) -> float:
    """One first-order MAML step in place; the mean query loss at the adapted weights."""
    A, C = adapt(E_in, E_out, tasks.Xs, tasks.ys, *inner, alpha)
    HQ, f = _forward(A, C, tasks.Xq, alpha)
    check_size(HQ, step, 1, "adapted pre-activation", bound)
    check_size(f, step, None, "adapted output", bound)
    value, g_in, g_out = _gradients(C, tasks.Xq, HQ, f, tasks.yq, alpha)
    E_out -= outer[1] * g_out.mean(axis=0)                     # the mean over tasks
    E_in -= outer[0] * g_in.mean(axis=0)
    return float(value.mean())


def meta_test(E_in, E_out, tasks: Tasks, inner: tuple, alpha: float) -> tuple:
    """Each test task's query accuracy and mean query cross-entropy after one inner step
    from (E_in, E_out)."""
    A, C = adapt(E_in, E_out, tasks.Xs, tasks.ys, *inner, alpha)
    f = _forward(A, C, tasks.Xq, alpha)[1]
    return (np.argmax(f, axis=-1) == tasks.yq).mean(axis=1), _xent(f, tasks.yq)[0].mean(axis=1)


@dataclass(frozen=True)
class MetaRun:
    """A MAML run: ``loss`` the query loss of every completed meta-step; ``accuracy`` and
    ``test_loss`` each test task's query accuracy and cross-entropy after adaptation at the
    end; ``weights`` the meta-learned pair (E_in, E_out); ``status`` how the run ended."""

    width: float
    limit: str | None
    loss: np.ndarray
    accuracy: np.ndarray
    test_loss: np.ndarray
    weights: tuple
    status: RunStatus


def train_maml(net: MLP, maml: MAML, train: FewShot, test: FewShot, width=math.inf,
               limit: str = "feature", seed: int = 0, test_tasks: int = 500,
               test_seed: int = 1, init=None, progress: bool = False,
               divergence_bound: float | None = 1e10) -> MetaRun:
    """Meta-train ``net`` with first-order MAML on ``train``'s tasks at ``width`` n (an int)
    or in the limit (``width=math.inf``; ``limit`` "feature" or "gp"), then meta-test on
    ``test_tasks`` tasks of ``test`` drawn with ``test_seed`` (the same for every width).
    ``seed`` draws a finite network's initial weights; ``init`` = (W¹ᵀ, W²) replaces them.
    Ctrl-C or a divergence ends meta-training early; the meta-test then runs on the weights
    reached, and the status says so (docs/theory.md §15.5)."""
    check_network(net, "MAML", "maml_network")
    if not isinstance(maml, MAML):
        raise SpecError(f"maml must be a tasks.MAML(...), got {type(maml).__name__}")
    for name, fs in (("train", train), ("test", test)):
        if not isinstance(fs, FewShot):
            raise SpecError(f"{name} must be a FewShot, got {type(fs).__name__}")
        if fs.d_in != net.d_in or fs.ways != net.d_out:
            raise SpecError(f"{name} has d_in = {fs.d_in} and {fs.ways} ways but the network "
                            f"has d_in = {net.d_in} and d_out = {net.d_out}")
    limit = check_choice(limit, "limit", LIMITS)
    test_seed = check_int(test_seed, "test_seed", 0)
    test_tasks = check_int(test_tasks, "test_tasks")
    inner = rates(net, width, maml.inner_lr, limit)
    outer = rates(net, width, maml.outer_lr, limit)
    alpha = inner[2]
    E_in, E_out, _ = initial(net, width, seed, init)
    rng = np.random.default_rng(maml.seed)
    T = maml.steps
    losses = np.full(T, np.nan)
    with progress_bar(progress, T, f"MAML {width_label(width)}") as on_step:
        loop = StepLoop(T, on_step)
        with loop:
            for t in loop:
                losses[t] = meta_step(E_in, E_out, train.sample(rng, maml.meta_batch),
                                      inner[:2], outer[:2], alpha, t, divergence_bound)
    status = RunStatus(loop.completed, loop.interrupted, loop.diverged)
    tasks = test.sample(np.random.default_rng(test_seed), test_tasks)
    if status.diverged:
        acc = test_loss = np.full(len(tasks), np.nan)
    else:
        acc, test_loss = meta_test(E_in, E_out, tasks, inner[:2], alpha)
    return MetaRun(float(width), limit if width == math.inf else None,
                   losses[: loop.completed], acc, test_loss, (E_in, E_out), status)
