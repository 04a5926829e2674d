"""Classification -> engine: which computation is the limit of this problem.

=====================================  =============================================
classification                         engine
=====================================  =============================================
unstable                               UnstableParametrizationError (the violated
                                       conditions named)
trivial, any L                         kernel.KernelEngine with K = 0: f̊_t = f̊_0
kernel regime, any L                   kernel.KernelEngine: kernel gradient descent
feature learning, L = 1, φ = id        one_hidden.LinearEngine (closed form)
feature learning, L = 1                one_hidden.ParticleEngine (Monte Carlo or
                                       quadrature)
feature learning, L >= 2, φ = id       deep.LinearEngine (exact)
feature learning, L >= 2               deep.MonteCarloEngine (Stein or tangent Ż)
Adam, kernel or trivial regime         UnsupportedError (a nonlinear kernel)
SGD with weight decay, kernel regime   UnsupportedError (decay moves W_0 by Θ(1))
=====================================  =============================================

SGD with momentum and weight decay (the routine's ``optimizer``) runs in every
feature-learning engine; the kernel engine takes momentum (docs/theory.md §10).

``method`` overrides the φ = id default ('monte_carlo' runs the particle
engines on a linear network too).  Every engine checks, in its constructor,
the options that concern it and the memory it will need, so selecting an
engine is the last step before any work.
"""
from __future__ import annotations

from ..errors import SpecError, UnstableParametrizationError, UnsupportedError
from .deep import LinearEngine as DeepLinear
from .deep import MonteCarloEngine
from .kernel import KernelEngine
from .one_hidden import LinearEngine as OneHiddenLinear
from .one_hidden import ParticleEngine


def select_engine(problem, options):
    """The engine for ``problem`` under ``options``, constructed (options and memory checked)."""
    net = problem.net
    param = net.param
    k = param.classify()
    if k.regime == "unstable":
        raise UnstableParametrizationError(
            f"{param.label} is unstable, so it has no infinite-width limit: "
            + "; ".join(k.violations))
    opt = problem.optimizer
    deep_fl = k.regime == "feature_learning" and net.L >= 2
    if options.backprop == "decoupled" and not deep_fl:
        raise SpecError("backprop='decoupled' applies to deep (L >= 2) feature-learning limits")
    if k.regime in ("kernel", "trivial"):
        if opt.kind == "adam":
            raise UnsupportedError(
                f"Adam in the {k.regime} regime: its entrywise normalization makes the limit a "
                "nonlinear kernel dynamics, which is not built (docs/theory.md §10.4); use a "
                "feature-learning parametrization (e.g. tp.mup(L, optimizer='adam'))")
        if opt.weight_decay:
            raise UnsupportedError(
                f"weight decay in the {k.regime} regime: decay shrinks W_0 by a Θ(1) factor, "
                "so f leaves its linearization at init and the limit is not kernel gradient "
                "descent (docs/theory.md §10.4); use weight_decay=0 (momentum is supported) "
                "or a feature-learning parametrization")
        return KernelEngine(problem, k, options)
    if options.method == "exact" and net.phi != "id":
        raise SpecError(f"method='exact' needs phi='id' (a closed form exists only for linear "
                        f"networks); got phi={net.phi!r}")
    if options.method == "exact" and opt.kind == "adam":
        raise SpecError("method='exact' follows SGD only: Adam's entrywise normalization is "
                        "not linear, so a linear network has no closed form under it; use "
                        "method='monte_carlo'")
    exact = options.method == "exact" or (options.method is None and net.phi == "id"
                                          and opt.kind == "sgd")
    if net.L == 1:
        return (OneHiddenLinear if exact else ParticleEngine)(problem, k, options)
    return (DeepLinear if exact else MonteCarloEngine)(problem, k, options)
