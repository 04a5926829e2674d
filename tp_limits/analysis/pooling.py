"""A metric of a Monte Carlo limit, from its replicates, without the Jensen bias.

A replicate r estimates the limit's outputs f with an error e_r of variance
σ²/N (particles; partners too for deep Adam).  A metric m that is nonlinear in
f (a loss, an accuracy) is biased when it is taken replicate by replicate:
E m(f + e_r) = m(f) + ½ tr(∇²m Var e_r) + …, a bias that does not shrink with
the replicates and grows with the noise (docs/theory.md §8.3).  Pooling the
replicates first (the mean output f̄ of R replicates, whose error has variance
σ²/(NR)) shrinks the bias by R, and the jackknife removes its 1/R term: with
m̂ = m(f̄) and m̂_{−r} = m(f̄ without replicate r), the pseudo-values

    p_r = R m̂ − (R − 1) m̂_{−r}

have mean m(f) + O(1/R²) and their spread is the standard error (R − 1
degrees of freedom).
"""
from __future__ import annotations

import numpy as np

from ..engine.trajectory import Trajectory
from ..spec import Problem


def pool(problem: Problem, runs: list) -> Trajectory:
    """The replicates' mean outputs as one trajectory: f_eval and f_train averaged, the
    training loss ℓ(f̄_t(ξ_b), y_b) and the held-out metrics recomputed from them."""
    first = runs[0]
    f_eval = np.mean([r.f_eval for r in runs], axis=0)
    f_train = np.mean([r.f_train for r in runs], axis=0)
    T = len(first.loss)
    Y = problem.targets[: T * problem.B].reshape(T, problem.B, -1)
    with np.errstate(invalid="ignore", over="ignore"):
        loss = np.array([np.mean(problem.loss.value(f_train[t], Y[t], np)) for t in range(T)])
    return Trajectory(f_eval, f_train, loss, problem.eval_metrics(f_eval),
                      {**first.meta, "pooled_replicates": len(runs)}, status=first.status)


def pseudo_values(problem: Problem, runs: list, measure) -> np.ndarray:
    """Jackknife pseudo-values R m(f̄) − (R − 1) m(f̄_{−r}) of ``measure`` (Trajectory ->
    float) over the replicates ``runs`` (at least two)."""
    R = len(runs)
    full = measure(pool(problem, runs))
    loo = np.array([measure(pool(problem, runs[:r] + runs[r + 1:])) for r in range(R)])
    return R * full - (R - 1) * loo


def replicate_values(problem: Problem, runs: list, measure) -> np.ndarray:
    """One value per replicate whose mean is m(f̄), the metric of the pooled outputs, and
    whose spread is the jackknife's: m(f̄) + (p_r − mean p), with p_r the pseudo-values."""
    pv = pseudo_values(problem, runs, measure)
    return measure(pool(problem, runs)) + (pv - np.mean(pv))
