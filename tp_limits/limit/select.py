"""Classification -> engine: which computation is the limit of this problem.

=====================================  =============================================
classification                         engine
=====================================  =============================================
unstable                               UnstableParametrizationError (the violated
                                       conditions named)
trivial, any L                         kernel.KernelEngine with K = 0: f̊_t = f̊_0
kernel regime, any L                   kernel.KernelEngine: kernel gradient descent
feature learning, L = 1, φ = id        fused.LinearEngine (exact/one_hidden.py)
feature learning, L = 1                fused.ParticleEngine (Monte Carlo or
                                       quadrature)
feature learning, L >= 2, φ = id       exact.LinearEngine (exact/program.py)
feature learning, L >= 2               montecarlo.MonteCarloEngine (Stein or tangent Ż)
feature learning, L = 1, a program     the deep engines (bias particles §13,
  that is not plain, or phases         normalizations §14, frozen layers §10.10)
optimizer not linear in the gradients  UnsupportedError (a nonlinear kernel)
(Adam), kernel or trivial regime
weight decay, kernel regime            UnsupportedError (decay moves W_0 by Θ(1))
orthogonal hidden initialization       UnsupportedError (not a Gaussian program)
an optimizer without a built limit     UnsupportedError (its ``limit_refusal``: a
  (a spectral transform of Adam, L ≥ 2)  spectral transform of a dense n × n direction)
=====================================  =============================================

Every optimizer (the routine's ``optimizer``) runs in every feature-learning
engine; the kernel engine and the exact ones take the optimizers that are linear
in the gradients (SGD with momentum; the kernel engine without weight decay,
docs/theory.md §10).  The engines ask the optimizer's traits, never its name.

``method`` overrides the φ = id default ('monte_carlo' runs the particle
engines on a linear network too); in the kernel and trivial regimes it does not
apply and is refused, as are the deep Monte Carlo engine's own knobs (``zdot``,
``partners``, ``debias_partners``) wherever another engine runs: an option that
would change nothing is an error, not silently ignored.  Every engine checks, in
its constructor, the options that concern it and the memory it will need, so
selecting an engine is the last step before any work.
"""
from __future__ import annotations

from ..engine.options import LIMIT_OPTIONS, option_default
from ..errors import SpecError, UnstableParametrizationError, UnsupportedError
from .exact import LinearEngine as DeepLinear
from .montecarlo import MonteCarloEngine
from .kernel import KernelEngine
from .fused import LinearEngine as OneHiddenLinear
from .fused import ParticleEngine


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
    refusal = net.limit_refusal() or opt.limit_refusal(net)
    if refusal:
        raise UnsupportedError(refusal)
    deep_fl = k.regime == "feature_learning" and net.L >= 2
    if options.backprop == "decoupled" and not deep_fl:
        raise SpecError("backprop='decoupled' applies to deep (L >= 2) feature-learning limits")
    if k.regime in ("kernel", "trivial"):
        refusal = opt.kernel_refusal(k.regime)
        if refusal:
            raise UnsupportedError(refusal)
        if options.method is not None:
            raise SpecError(f"method={options.method!r} does not apply: {param.label} is in the "
                            f"{k.regime} regime, whose limit is kernel gradient descent from "
                            "the NNGP and NTK (the kernel engine); leave method=None")
        _refuse_deep_knobs(options, "the kernel-regime limit")
        return KernelEngine(problem, k, options)
    _refuse_kernel_knobs(options, param.label)
    if options.method == "exact" and net.phi != "id":
        raise SpecError(f"method='exact' needs phi='id' (a closed form exists only for linear "
                        f"networks); got phi={net.phi!r}")
    if options.method == "exact" and not opt.exact_linear:
        raise SpecError(f"method='exact' follows optimizers linear in the gradients and "
                        f"matrix functions of the buffer (Muon) only: {opt} moves some "
                        "coordinates by an entrywise nonlinear rule (Adam), so a linear "
                        "network has no closed form under it; use method='monte_carlo'")
    exact = options.method == "exact" or (options.method is None and net.phi == "id"
                                          and opt.exact_linear)
    if net.L == 1 and (not opt.coordinatewise or not problem.program.plain
                       or problem.clocks.phased):
        # a step that needs particle means first (Muon's Gram of the update), a program
        # the fused one-hidden sweep does not take (biases, a normalization), or phases
        # that freeze a layer: the deep engines, which walk any program and read the
        # phases' clocks, with no hidden matrix
        if exact:
            _refuse_deep_knobs(options, "the exact linear limit")
        return (DeepLinear if exact else MonteCarloEngine)(problem, k, options)
    if net.L == 1:
        _refuse_deep_knobs(options, "the one-hidden-layer limit (its particles carry "
                           "every optimizer's state themselves)")
        return (OneHiddenLinear if exact else ParticleEngine)(problem, k, options)
    if exact:
        _refuse_deep_knobs(options, "the exact deep linear limit")
    return (DeepLinear if exact else MonteCarloEngine)(problem, k, options)


def _refuse_kernel_knobs(options, label: str) -> None:
    """The kernel engine's knobs refused in a feature-learning limit, whose f_0 is 0 by
    the mathematics (feature learning forces a_{L+1} + b_{L+1} ≥ 1, docs/theory.md
    §1.2): an f_0 array or a number of NNGP draws would change nothing.  ``f0='zero'``
    agrees with that limit and passes (studies that treat every regime alike ask for it)."""
    asked = []
    if not (isinstance(options.f0, str) and options.f0 in ("sample", "zero")):
        asked.append("f0 given as an array")
    if options.samples != option_default(LIMIT_OPTIONS, "samples"):
        asked.append(f"samples={options.samples!r}")
    if asked:
        raise SpecError(f"{' and '.join(asked)} does not apply: {label} is feature learning, "
                        "so its limit starts from f_0 = 0 (no NNGP draw); f0 and samples "
                        "are knobs of the kernel-regime limit — leave them at their defaults")


#: the knobs only the deep Monte Carlo engine reads (defaults: the option table's)
DEEP_KNOBS = ("zdot", "partners", "debias_partners")


def _refuse_deep_knobs(options, where: str) -> None:
    """The knobs of the deep Monte Carlo engine alone (zdot; partners and debias_partners,
    for optimizers not linear in the gradients) refused, not ignored, elsewhere: a
    value other than the default was asked for and would change nothing."""
    asked = [f"{o.name}={getattr(options, o.name)!r}" for o in LIMIT_OPTIONS
             if o.name in DEEP_KNOBS and getattr(options, o.name) != o.default]
    if asked:
        raise SpecError(f"{', '.join(asked)} does not apply to {where}: zdot, partners and "
                        "debias_partners are knobs of the deep (L >= 2) Monte Carlo engine; "
                        "leave them at their defaults")
