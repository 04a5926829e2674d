"""``train_finite``: train the width-n network of an :class:`MLP` on a :class:`Routine`.

Per step t (docs/theory.md §0): forward pass on the batch with W_t, χ_t =
∇ℓ/B at f_t, backward pass with W_t, simultaneous update to W_{t+1}; the
evaluation inputs are evaluated with W_0 before the first step and with
W_{t+1} after each step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..engine.backend import get_backend
from ..engine.budget import refuse_beyond_budget
from ..engine.memory import require_memory
from ..engine.meta import run_meta
from ..engine.options import FINITE_OPTIONS, option_record
from ..engine.progress import progress_bar
from ..engine.status import RunStatus
from ..engine.steps import StepLoop, eval_steps
from ..engine.trajectory import Trajectory, Weights
from ..errors import DivergenceError, SpecError
from ..spec import MLP, Problem, Routine
from ..spec.checks import check_width
from .cost import time_estimate
from .network import FiniteNetwork
from .stats import StatsRecorder


class _Derived:
    """What the finite engine derives from its options, each by one rule."""

    @property
    def keeps_initial(self) -> bool:
        """Whether the run keeps a copy of W_0 (statistics, or the weights returned)."""
        return bool(self.record) or self.keep_weights

    def eval_steps(self, T: int) -> tuple:
        """The steps whose f on the evaluation inputs is evaluated and whose statistics
        are recorded: every ``eval_every``-th, and always 0 and T (the limit's rule)."""
        return eval_steps(T, self.eval_every)


#: every option of train_finite after (net, routine, width), checked by the one table
FiniteOptions = option_record("FiniteOptions", FINITE_OPTIONS, "train_finite", __name__,
                              bases=(_Derived,))


@dataclass(frozen=True)
class FinitePlan:
    """A checked finite-width run, ready to go: the problem, the width, the options, the
    backend."""

    problem: Problem
    width: int
    options: object          # FiniteOptions
    backend: object
    time_estimate: float = 0.0


def prepare_finite(net: MLP, routine: Routine, width: int, **options) -> FinitePlan:
    """Check everything :func:`train_finite` would check — the problem, the width, every
    option (the table of docs/api.md) and the memory — without running anything."""
    problem = Problem(net, routine)
    width = check_width(width)
    o = FiniteOptions.of(**options)
    b = get_backend(o.backend)
    if o.backprop == "decoupled" and net.L < 2:
        raise SpecError("backprop='decoupled' needs L >= 2 (it decouples hidden n x n matrices)")
    weights = FiniteNetwork.bytes_needed(net, width, o.dtype, o.backprop, problem.optimizer,
                                         o.keeps_initial, problem.B, problem.T)
    require_memory(weights + run_bytes(problem, width, o.dtype, o.record),
                   f"width {width} (weights, the copies a run keeps, its activations and "
                   "recorded statistics)", b,
                   advice="lower the width, use dtype=numpy.float32, or record=() (no W_0 "
                          "copy, no (T+1)·E·E feature kernels)")
    estimate = time_estimate(problem, width, o.record, len(o.eval_steps(problem.T)))
    refuse_beyond_budget(
        estimate, o.time_budget,
        f"training width {width} (T = {problem.T} steps, L = {net.L}"
        + (", a history-based matrix update whose cost grows with the steps"
           if problem.optimizer.pair_matrix else "")
        + (f", record={tuple(o.record)!r}" if o.record else "") + ")",
        "a smaller width, fewer steps or record=()")
    return FinitePlan(problem, width, o, b, estimate)


def run_bytes(problem: Problem, width: int, dtype, record) -> int:
    """Bytes a run holds beside the weights: the forward pass's h^l and x^l and the
    backward signals for the larger of a batch and the evaluation inputs (about 3 L
    rows·n values), and with ``record`` the statistics: (T+1)·E·E for the feature
    kernel and (T+1)·L·E per coordinate statistic (host float64)."""
    net, T, E = problem.net, problem.T, problem.E
    rows = max(problem.B, E)
    activations = 3 * (net.L + 1) * rows * width * np.dtype(dtype).itemsize
    stats = 8 * (T + 1) * (E * E + 6 * (net.L + 1) * E) if "stats" in record else 0
    return activations + stats


def train_finite(net: MLP, routine: Routine, width: int, seed: int = 0, backend: str = "numpy",
                 dtype=np.float64, backprop: str = "exact", record=("stats",),
                 on_divergence: str = "raise", progress: bool = False,
                 divergence_bound: float | None = 1e10, keep_weights: bool = False,
                 **knobs) -> Trajectory:
    """Train ``net`` at width ``width`` on ``routine``; return its :class:`Trajectory`.

    Parameters
    ----------
    backend : 'numpy' or 'cupy' (CuPy imported only when asked for).
    backprop : 'exact', or 'decoupled' (docs/theory.md §3; a negative control).
    record : subset of ('stats', 'spectral'): per-layer coordinate statistics
        on the evaluation inputs (finite/stats.py; the default), and spectral-norm
        ratios (‖W_0‖_* by Lanczos, ‖ΔW‖_* by power iteration, docs/theory.md §7.4;
        asked for, as they cost about as much as the training itself); either keeps
        a copy of W_0.  f_eval, f_train and loss are always recorded.
    on_divergence : 'raise' a DivergenceError naming step, layer and
        quantity, or 'stop' and return the partial trajectory, whose
        ``divergence`` says where.
    divergence_bound : a pre-activation or output whose magnitude exceeds this
        counts as a divergence even while finite (default 1e10; None: only
        inf and NaN do).
    keep_weights : return the weights W^1..W^{L+1} (W-space, docs/theory.md §7.1), and
        the biases of a network with them, of the initial network and after the last
        completed step as ``Trajectory.weights`` (host arrays; a copy of W_0 is kept
        during the run).
    knobs : ``time_budget`` (a keyword, default 3600 s): refuse, before any work, a run
        whose estimate (finite/cost.py, a cost model fitted to measured runs:
        docs/performance.md, "Time estimates") exceeds this many seconds; None runs
        anything.  The estimate is in ``meta['time_estimate_s']``.  ``eval_every``
        (default 1): evaluate f on the evaluation inputs, and record the statistics,
        only every k-th step and at 0 and T, as the limit's option of that name does;
        the other rows of ``f_eval`` and of the statistics are NaN and
        ``meta['eval_steps']`` lists the evaluated ones.  A sweep that reads only the
        end of training saves the evaluation passes in between.

    The optimizer and its hyperparameters (momentum, weight decay, Adam's β
    and ε, all width-free) are the routine's ``optimizer`` (docs/theory.md §10).

    Ctrl-C stops cleanly: the steps completed so far are returned, with
    ``interrupted`` True (``Trajectory.status``).
    """
    plan = prepare_finite(net, routine, width, seed=seed, backend=backend, dtype=dtype,
                          backprop=backprop, record=record, on_divergence=on_divergence,
                          progress=progress, divergence_bound=divergence_bound,
                          keep_weights=keep_weights, **knobs)
    return run_finite(plan)


def run_finite(plan: FinitePlan) -> Trajectory:
    """Train the network of a checked plan (:func:`prepare_finite`)."""
    problem, o, b, width = plan.problem, plan.options, plan.backend, plan.width
    net, routine, dtype, record = problem.net, problem.routine, o.dtype, o.record
    started = time.perf_counter()
    nw = FiniteNetwork(net, width, routine.lr, o.seed, b, dtype, o.backprop, problem.optimizer,
                       o.keeps_initial, o.divergence_bound, problem.clocks)
    T, B, E = problem.T, problem.B, problem.E
    xp, tonp = b.xp, b.to_numpy
    Xe = b.asarray(problem.eval_inputs, dtype)
    evaluated = frozenset(o.eval_steps(T))
    f_eval = np.full((T + 1, E, net.d_out), np.nan)        # NaN: a step not evaluated
    f_train = np.zeros((T, B, net.d_out))
    losses = np.zeros(T)
    recorder = (StatsRecorder(nw, T, E, coordinates="stats" in record,
                              spectral="spectral" in record) if record else None)

    def evaluate(t):
        if t not in evaluated:
            return
        hs, xs, f = nw.forward(Xe, step=t)
        f_eval[t] = tonp(f)
        if recorder is not None:
            try:
                recorder.record(t, hs, xs, f)
            except np.linalg.LinAlgError:        # a norm of weights that overflowed
                raise DivergenceError(t, None, "weights", "their norms could not be "
                                      "computed") from None

    with progress_bar(o.progress, T, f"width {width}") as on_step:
        loop = StepLoop(T, on_step, catch_divergence=o.on_divergence != "raise")
        with loop:
            evaluate(0)
            for t in loop:
                Xt, Yt = problem.batch(t)
                Xb, Yb = b.asarray(Xt, dtype), b.asarray(Yt, dtype)
                hs, xs, f = nw.forward(Xb, step=t)
                losses[t] = float(xp.mean(problem.loss.value(f, Yb, xp)))
                if not np.isfinite(losses[t]):
                    raise DivergenceError(t, None, "loss")
                f_train[t] = tonp(f)
                nw.step(hs, xs, problem.loss.grad(f, Yb, xp) / B, problem.rate(t))
                evaluate(t + 1)
    done = loop.completed
    status = RunStatus(done, loop.interrupted, loop.diverged)
    meta = run_meta(problem, status, time.perf_counter() - started, engine="finite",
                    width=int(width), seed=int(o.seed), backend=b.name, dtype=dtype.name,
                    backprop=o.backprop, record=list(record),
                    eval_steps=[s for s in sorted(evaluated) if s <= done],
                    time_estimate_s=round(plan.time_estimate, 3))
    stats = recorder.truncate(done + 1) if recorder else {}
    stats.update(problem.eval_metrics(f_eval[: done + 1]))
    weights = (Weights(tuple(tonp(W) for W in nw.W0), tuple(tonp(W) for W in nw.W),
                       {l: tonp(b) for l, b in nw.bias0.items()},
                       {l: tonp(b) for l, b in nw.bias.items()})
               if o.keep_weights else None)
    return Trajectory(f_eval=f_eval[: done + 1], f_train=f_train[:done], loss=losses[:done],
                      stats=stats, meta=meta, status=status, weights=weights)
