"""The typed result every limit engine returns, and the one way it becomes a Trajectory.

An engine fills a :class:`LimitResult` step by step (rows it did not
evaluate stay NaN); :mod:`tp_limits.limit.replicates` averages several;
:meth:`LimitResult.to_trajectory` cuts it to the completed steps and builds
the :class:`~tp_limits.Trajectory` with the finite engine's statistic names.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..engine.status import Divergence, RunStatus
from ..engine.trajectory import Trajectory


@dataclass
class CoordinateMoments:
    """Second moments of the limit's coordinates on the eval inputs, t = 0..T.

    ``h_sq[t, l, e]`` = E[(Z^{h^{l+1}_t(ζ_e)})²], ``dh_sq`` = E[(Z^{h_t} − Z^{h_0})²],
    ``x_sq`` and ``dx_sq`` the same for x = φ(h) (layers 1..L along axis 1);
    ``feature_kernel[t]`` = E[Z^{x^L_t(ζ)} Z^{x^L_t(ζ')}].  They are averaged over
    replicates as moments and turned into the Trajectory's rms statistics
    (``h_rms`` ...) only at the end.
    """

    h_sq: np.ndarray
    dh_sq: np.ndarray
    x_sq: np.ndarray
    dx_sq: np.ndarray
    feature_kernel: np.ndarray

    FIELDS = ("h_sq", "dh_sq", "x_sq", "dx_sq", "feature_kernel")

    @classmethod
    def empty(cls, T: int, L: int, E: int) -> "CoordinateMoments":
        per_layer = lambda: np.full((T + 1, L, E), np.nan)  # noqa: E731
        return cls(per_layer(), per_layer(), per_layer(), per_layer(),
                   np.full((T + 1, E, E), np.nan))

    @classmethod
    def mean(cls, many: list) -> "CoordinateMoments":
        return cls(*(np.mean([getattr(m, f) for m in many], axis=0) for f in cls.FIELDS))

    def to_stats(self, upto: int) -> dict:
        """The Trajectory statistics (names as in the finite engine) for t < ``upto``."""
        rms = lambda a: np.sqrt(np.mean(a, axis=2))[:upto]  # noqa: E731
        fk = self.feature_kernel[:upto]
        change = np.sqrt(np.mean((fk - fk[0]) ** 2, axis=(1, 2)))
        return {"h_rms": rms(self.h_sq), "x_rms": rms(self.x_sq), "dh_rms": rms(self.dh_sq),
                "dx_rms": rms(self.dx_sq), "feature_kernel": fk, "feature_kernel_change": change}


@dataclass
class LimitResult:
    """What a limit engine computed.

    ``f_eval``, ``f_eval_se`` (T+1, E, d_out) — NaN at steps not evaluated;
    ``f_train`` (T, B, d_out) and ``loss`` (T,) — at each step, before its
    update; ``completed`` steps, and whether the run was ``interrupted`` or
    ``diverged`` (a :class:`~tp_limits.engine.status.Divergence`); ``moments`` when
    statistics were recorded; ``f_eval_samples`` (S, T+1, E, d_out) when the
    limit is random through f_0 and S draws were followed; ``se_method`` says
    where ``f_eval_se`` comes from and ``se_dof`` how many degrees of freedom
    that standard error has (None when it is not a sampling error: 0 for the
    exact engines, a rule difference for quadrature; docs/theory.md §8.1);
    ``info`` holds the engine's own metadata (particles, ...), merged into
    ``Trajectory.meta``; ``extras`` holds further (T+1, E, d_out) estimates
    (e.g. the deep Adam engine's f̊ at M and 2M partners), averaged over
    replicates with their standard errors and reported in ``Trajectory.stats``.
    """

    f_eval: np.ndarray
    f_eval_se: np.ndarray
    f_train: np.ndarray
    loss: np.ndarray
    completed: int = 0
    interrupted: bool = False
    diverged: Divergence | None = None
    moments: CoordinateMoments | None = None
    f_eval_samples: np.ndarray | None = None
    se_method: str = ""
    se_dof: int | None = None
    info: dict = field(default_factory=dict)
    extras: dict = field(default_factory=dict)

    @staticmethod
    def bytes_needed(T: int, E: int, B: int, d_out: int, L: int | None = None) -> float:
        """Bytes of :meth:`empty`'s arrays: outputs and errors (T+1)·E·d_out each, the
        training rows and losses, and with ``L`` the moments 4·(T+1)·L·E and the feature
        kernels (T+1)·E·E (the largest, for many eval inputs)."""
        n = 2 * (T + 1) * E * d_out + T * B * d_out + T
        if L is not None:
            n += 4 * (T + 1) * L * E + (T + 1) * E * E
        return 8.0 * n

    @staticmethod
    def shrink_advice(E: int, stats: bool) -> str:
        """How to make the recorded results smaller, for a memory refusal."""
        return (f"record=() drops the statistics, whose (T+1)·E·E feature kernels of "
                f"E = {E:,} eval inputs dominate; else fewer steps or eval inputs"
                if stats else "fewer steps or eval inputs")

    @classmethod
    def empty(cls, T: int, E: int, B: int, d_out: int, L: int | None = None,
              se: float = np.nan) -> "LimitResult":
        """NaN outputs, zero training rows; with ``L``, NaN coordinate moments too."""
        return cls(np.full((T + 1, E, d_out), np.nan), np.full((T + 1, E, d_out), se),
                   np.zeros((T, B, d_out)), np.zeros(T),
                   moments=None if L is None else CoordinateMoments.empty(T, L, E))

    def finish(self, loop) -> "LimitResult":
        """Take how the run ended from its :class:`~tp_limits.engine.steps.StepLoop`."""
        self.completed, self.interrupted, self.diverged = (loop.completed, loop.interrupted,
                                                           loop.diverged)
        return self

    def check_loss(self) -> None:
        """A loss that overflowed (f still finite but huge) ends the run as a divergence."""
        bad = np.flatnonzero(~np.isfinite(self.loss[: self.completed]))
        if len(bad) and (self.diverged is None or bad[0] < self.diverged.step):
            self.diverged = Divergence(int(bad[0]), None, "loss")
            self.completed = int(bad[0])

    def status(self) -> RunStatus:
        """How the run ended, as the Trajectory reports it."""
        return RunStatus(self.completed, self.interrupted, self.diverged, self.se_dof)

    def to_trajectory(self, meta: dict, record_stats: bool = True, problem=None) -> Trajectory:
        """The Trajectory of the completed steps; with ``problem``, its held-out loss and
        accuracy too (when the routine has eval targets)."""
        done = self.completed
        stats = self.moments.to_stats(done + 1) if (record_stats and self.moments) else {}
        samples = None if self.f_eval_samples is None else self.f_eval_samples[:, : done + 1]
        if samples is not None:
            stats["f_eval_samples"] = samples
        if problem is not None:
            stats.update(problem.eval_metrics(self.f_eval[: done + 1], samples))
        stats.update({k: v[: done + 1] for k, v in self.extras.items()})
        return Trajectory(f_eval=self.f_eval[: done + 1], f_train=self.f_train[:done],
                          loss=self.loss[:done], stats=stats, meta=meta,
                          f_eval_se=self.f_eval_se[: done + 1], status=self.status())
