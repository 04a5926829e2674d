"""The network half of the problem description: :class:`MLP`, and the one
place where the parametrization's exponents become per-layer numbers.

Conventions are those of docs/theory.md §0.  Every engine asks the MLP for
its constants instead of recomputing powers of n:

* :meth:`MLP.finite_constants` — the width-n network (docs/theory.md §7.1):
  init std σ_l n^{-(a_l+b_l)} and W-space learning rate η_l n^{-(2a_l+c_l)}
  (Adam: η_l n^{-c_l} on w, with W = n^{-a_l} w);
* :meth:`MLP.limit_constants` — the infinite-width limit (docs/theory.md §5.1):
  the same η_l with the power of n replaced by the classification's switch
  e_l ∈ {0, 1}.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..abc.parametrization import ABC
from ..abc.update_rules import update_rule
from ..errors import SpecError
from ..nonlinearities import Nonlinearity, get_nonlinearity
from . import initializations
from .layers import NORMS
from .bias import Bias
from .checks import (check_choice, check_int, check_width, finite_non_negative,
                     finite_nonzero, finite_positive, per_layer, repeat_hidden)
from .program import Layer, Program
from .residual import Residual


@dataclass(frozen=True)
class FiniteConstants:
    """Per-layer numbers of the width-n network (layers 1..L+1 in order).

    ``init_std[l]`` = σ_l s n^{-(a_l+b_l)} (0 for a zero readout);
    ``lr[l]`` = η lr_mult_l n^{-(2a_l+c_l)}, the SGD step in W-space;
    ``adam_lr[l]`` = η lr_mult_l n^{-c_l} and ``w_scale[l]`` = n^{-a_l}, the
    Adam step on w and the map W = n^{-a_l} w; ``eps_scale[l]`` = n^{-g_l}, the
    size of layer l's gradient entries in w-units (Adam's ε is ε · eps_scale,
    docs/theory.md §10.3); ``decay[l]`` = η lr_mult_l, the per-step shrink of
    layer l per unit of width-free weight decay (§10.1); ``alpha`` multiplies
    the output; ``branch`` and ``skip`` are empty for a plain MLP and, for a residual one,
    the multiplier of each layer's product and the layer whose pre-activation its skip
    adds (−1: none): h^l = h^{skip[l]} + branch[l] W^l x^{l−1} (docs/theory.md §12).
    Every ``lr_mult`` here is the effective one (times K^{−γ} in the blocks).
    ``bias``: the same numbers for the biases (entry l: the bias of layer l + 1, a weight
    with input 1; entry L: the readout's), or None without biases (docs/theory.md §13).
    """

    width: int
    init_std: tuple
    lr: tuple
    adam_lr: tuple
    w_scale: tuple
    alpha: float
    eps_scale: tuple = ()
    decay: tuple = ()
    branch: tuple = ()
    skip: tuple = ()
    bias: "FiniteConstants | None" = None


@dataclass(frozen=True)
class LimitConstants:
    """Per-layer numbers of the feature-learning limit (docs/theory.md §5.1).

    ``sigma[l]`` = σ_l s (times the initialization's limit constant, MLP.limit_sigma);
    ``eta[l]`` = η lr_mult_l e_l for l = 1..L (e_l = [r_l = 0]) and η lr_mult_{L+1} e_V
    for the readout (e_V = [q = 1]); ``readout_init`` is e_ω = [p = 1] (Z^{nV}_0 ≠ 0);
    ``alpha`` multiplies the output; ``decay[l]`` = η lr_mult_l (no switch: weight decay
    shrinks W_0 too, whether or not the layer's gradient updates survive the limit,
    docs/theory.md §10.2); ``branch`` as in :class:`FiniteConstants`; ``bias``: the same
    numbers for the biases (entry l: the bias of layer l + 1, whose switch is the input
    layer's; entry L: the readout's, σ = 0 and always moving), or None (§13).
    """

    sigma: tuple
    eta: tuple
    alpha: float
    readout_init: bool
    decay: tuple = ()
    branch: tuple = ()
    skip: tuple = ()
    bias: "LimitConstants | None" = None


#: the normalizations' default ε (width-free)
DEFAULT_NORM_EPS = 1e-5


def _norm(norm, eps, param: ABC):
    """The normalization kind of MLP(norm=, norm_eps=), or None; the kind refuses the
    parametrizations whose width exponents it would change (docs/theory.md §14.4)."""
    if norm is None:
        if eps != DEFAULT_NORM_EPS:
            raise SpecError(f"norm_eps = {eps!r} needs norm = 'layer' or 'rms' (there is no "
                            "normalization to take it)")
        return None
    kind = NORMS[check_choice(norm, "norm", tuple(NORMS))](eps)
    why = kind.width_refusal(param.classify())
    if why:
        raise SpecError(f"norm = {norm!r} with {param.label}: {why}")
    return kind


def _rate_multiplier(value, name: str) -> float:
    """A learning-rate multiplier: a finite number >= 0, where 0 freezes the layer."""
    try:
        return finite_non_negative(value, name)
    except SpecError:
        raise SpecError(f"{name} = {value!r} must be a positive finite number, or 0 to freeze "
                        "the layer") from None


@dataclass(frozen=True, init=False)
class MLP:
    """An MLP with an abc-parametrization and width-independent constants.

    f(ξ) = α W^{L+1} φ(W^L ... φ(W^1 ξ)), W^l = n^{-a_l} w^l,
    w^l ~ N(0, σ_l² n^{-2 b_l}), learning rate of layer l = η · lr_mult_l · n^{-c_l}.

    ``sigma`` (σ_l) and ``lr_mult`` are per-layer constants (scalar or L+1
    values); ``lr_mult_l = 0`` freezes layer l at its initialization (the published
    infinite-depth analysis keeps the input and output layers fixed, docs/theory.md
    §12.3); ``readout_multiplier`` is α.  ``output_scale`` s is the
    init-scale knob of docs/theory.md §7.3: every σ_l is multiplied by s and
    the output by s^{-(L+1)}.  For positively homogeneous φ (relu, id),
    training with learning rate s² η then reproduces the s = 1 training
    exactly, whatever s.  ``init`` ('gaussian', 'spectral' or 'orthogonal') says how
    the initial matrices are drawn (spec/initializations.py, docs/theory.md §11.6).
    ``residual`` (a :class:`Residual`, L >= 2) adds skip connections around W^2..W^L:
    h^l = h^{l−1} + K^{−α} W^l φ(h^{l−1}), and multiplies their rates by K^{−γ},
    K = L − 1 (docs/theory.md §12).  ``bias`` (True or a :class:`Bias`) adds a bias to every
    hidden layer and to the readout, each a weight with input 1 (docs/theory.md §13).
    ``norm`` ("layer" or "rms") normalizes every hidden pre-activation over the width before
    φ, x^l = φ(N(h^l)) with N(h) = (h − mean h)/√(var h + ε) or h/√(mean h² + ε),
    ε = ``norm_eps``, no gains; in a residual network the blocks are then pre-norm,
    h ← h + K^{−α} W φ(N(h)) (docs/theory.md §14).
    """

    param: ABC
    d_in: int
    d_out: int
    phi: str
    sigma: tuple
    lr_mult: tuple
    readout_multiplier: float
    output_scale: float
    init: str
    residual: Residual | None
    bias: Bias | None
    norm: object

    def __init__(self, param: ABC, d_in: int, d_out: int = 1, phi: str = "tanh", sigma=None,
                 lr_mult=None, readout_multiplier: float = 1.0, output_scale: float = 1.0,
                 init: str = "gaussian", residual: Residual | None = None, bias=None,
                 norm: str | None = None, norm_eps: float = DEFAULT_NORM_EPS):
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
        object.__setattr__(self, "sigma", per_layer(sigma, "sigma", L1))
        object.__setattr__(self, "lr_mult", per_layer(lr_mult, "lr_mult", L1, _rate_multiplier))
        if not any(self.lr_mult):
            raise SpecError("lr_mult is 0 for every layer: nothing would train; give at least "
                            "one layer a positive rate multiplier")
        object.__setattr__(self, "readout_multiplier",
                           finite_nonzero(readout_multiplier, "readout_multiplier"))
        object.__setattr__(self, "output_scale", finite_positive(output_scale, "output_scale"))
        object.__setattr__(self, "init", check_choice(init, "init", initializations.INITS))
        if Residual.of(residual) is not None:
            residual.check_depth(param.L)
        object.__setattr__(self, "residual", residual)
        bias = Bias.of(bias)
        if bias is not None:
            bias.check_depth(param.L)
        object.__setattr__(self, "bias", bias)
        object.__setattr__(self, "norm", _norm(norm, norm_eps, param))

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

    def with_depth(self, L: int) -> "MLP":
        """This network with ``L`` hidden layers: the parametrization's hidden exponents and
        the hidden layers' σ and rate multipliers (which must agree) repeated."""
        param = self.param.with_depth(L)
        per = {name: repeat_hidden(v, L, 1, f"the hidden layers' {name}")
               for name, v in (("sigma", self.sigma), ("lr_mult", self.lr_mult))}
        return MLP(param, self.d_in, self.d_out, self.phi, per["sigma"], per["lr_mult"],
                   self.readout_multiplier, self.output_scale, self.init, self.residual,
                   None if self.bias is None else self.bias.with_depth(L),
                   *self.norm_arguments)

    @property
    def norm_arguments(self) -> tuple:
        """(norm, norm_eps) as given to the constructor."""
        return (None, DEFAULT_NORM_EPS) if self.norm is None else (self.norm.name,
                                                                   self.norm.eps)

    def with_blocks(self, K: int) -> "MLP":
        """This residual network with ``K`` blocks (L = 1 + K·block_depth)."""
        if self.residual is None:
            raise SpecError("with_blocks needs a residual network (MLP(..., residual=...))")
        return self.with_depth(1 + check_int(K, "K") * self.residual.block_depth)

    @property
    def effective_lr_mult(self) -> tuple:
        """lr_mult_l, times K^{−γ} for the residual blocks' matrices W^2..W^L."""
        return self._blocks_rate(self.lr_mult)

    def _blocks_rate(self, m: tuple) -> tuple:
        """Per-layer multipliers with K^{−γ} on the blocks' layers 2..L (none without skips)."""
        if self.residual is None:
            return m
        k = self.residual.lr_factor(self.L)
        return (m[0],) + tuple(x * k for x in m[1:-1]) + (m[-1],)

    @property
    def bias_lr_mult(self) -> tuple:
        """m_{b,l} of the hidden biases (times K^{−γ} inside the blocks) and the readout's
        (0 without a readout bias); () without biases."""
        if self.bias is None:
            return ()
        m = self.bias.lr_mults(self.L)
        return self._blocks_rate(m[:-1] + ((m[-1] if self.bias.readout else 0.0),))

    @property
    def branch(self) -> tuple:
        """() for a plain MLP; for a residual one, each layer's multiplier (K^{−α} for a
        block's last matrix, 1 elsewhere: input layer, readout, a branch's inner matrix)."""
        return () if self.residual is None else self.residual.multipliers(self.L)

    @property
    def skips(self) -> tuple:
        """() for a plain MLP; for a residual one, the 0-based layer whose pre-activation
        each layer's skip adds (−1: none)."""
        return () if self.residual is None else self.residual.skips(self.L)

    def rate_multiplier(self, parameter) -> float:
        """The effective learning-rate multiplier of a program parameter (spec/program.py):
        lr_mult_l (times K^{−γ} in the blocks), or the bias's m_{b,l}."""
        mults = self.bias_lr_mult if parameter.is_bias else self.effective_lr_mult
        return mults[parameter.layer]

    @property
    def bias_sigmas(self) -> tuple:
        """σ_{b,l} of the L hidden biases (() without biases)."""
        return () if self.bias is None else self.bias.sigmas(self.L)

    @property
    def program(self) -> Program:
        """The network as a program of L + 1 layers (spec/program.py): each layer's bias,
        residual skip and branch multiplier; the walk every engine takes."""
        L = self.L
        skips = self.skips or (-1,) * (L + 1)
        branch = self.branch or (1.0,) * (L + 1)
        biased = (() if self.bias is None
                  else tuple(range(L)) + ((L,) if self.bias.readout else ()))
        linear = (self.residual.linear_layers(L) if self.residual is not None
                  else (False,) * (L + 1))
        inside = self.residual is not None and self.residual.phi_inside
        # φ inside the branches: the stream's layers are normalized and linear, the
        # branches' inner layers take φ alone (Residual's docstring)
        norms = tuple(self.norm if l < L and (linear[l] or not inside) else None
                      for l in range(L + 1))
        return Program(tuple(Layer(l, bias=l in biased, skip=skips[l], branch=branch[l],
                                   norm=norms[l], phi=not linear[l])
                             for l in range(L + 1)))

    @property
    def limit_sigma(self) -> tuple:
        """σ_l · s times the constant the initialization scheme puts on the Gaussian in the
        limit (1, or κ_l and ½ for spectral-norm initialization; docs/theory.md §11.6)."""
        factors = initializations.limit_factors(self.init, self.L, self.d_in, self.d_out)
        return tuple(s * f for s, f in zip(self.effective_sigma, factors))

    def limit_refusal(self) -> str | None:
        """Why no limit engine can run this network (None if one can): the initialization."""
        return initializations.limit_refusal(self.init, self.L)

    @property
    def output_multiplier(self) -> float:
        """α · s^{-(L+1)}: the factor in front of W^{L+1} x^L."""
        return self.readout_multiplier * self.output_scale ** (-(self.L + 1))

    def init_exponents(self) -> tuple:
        """Exact a_l + b_l per layer (Fraction, or inf for a zero readout)."""
        a, b, _ = self.param._fractions
        return tuple(x + y for x, y in zip(a, b))

    def lr_exponents(self, optimizer: str | None = None) -> tuple:
        """Exact exponent of n in the W-space step size: 2a_l + c_l (SGD), a_l + c_l (Adam).

        ``optimizer`` defaults to the parametrization's.  Adam normalizes each
        entry of its w-update, so only one factor n^{-a_l} (the map
        W = n^{-a_l} w) multiplies the w-space rate n^{-c_l}.
        """
        a, _, c = self.param._fractions
        k = 2 if (optimizer or self.param.optimizer) == "sgd" else 1
        return tuple(k * x + y for x, y in zip(a, c))

    def eps_exponents(self) -> tuple:
        """Exact g_l with layer l's gradient entries in w-units Θ(n^{-g_l}) (docs/theory.md
        §10.3): g_l = a_l + m for l <= L (the backward signal is n^{-m}, m = min(p, q)), and
        a_{L+1} for the readout (its W-gradient α χ x^Lᵀ has Θ(1) entries)."""
        a, b, c = self.param._fractions
        L = self.L
        rule = update_rule(self.param.optimizer)
        q = rule.a_factor * a[L] + c[L] + rule.entry_exponent(L, L)
        m = min(a[L] + b[L], q)
        return tuple(a[l] + m for l in range(L)) + (a[L],)

    def finite_constants(self, width: int, lr: float = 1.0) -> FiniteConstants:
        """The width-n numbers (docs/theory.md §7.1); ``lr`` is the base rate η."""
        n = check_width(width)
        a, _, c = self.param._fractions
        init = tuple(0.0 if e == math.inf else s * n ** -float(e)
                     for s, e in zip(self.effective_sigma, self.init_exponents()))
        mult = self.effective_lr_mult
        sgd = tuple(lr * m * n ** -float(e) for m, e in zip(mult, self.lr_exponents("sgd")))
        adam = tuple(lr * m * n ** -float(ci) for m, ci in zip(mult, c))
        eps = tuple(n ** -float(g) for g in self.eps_exponents())
        return FiniteConstants(n, init, sgd, adam, tuple(n ** -float(ai) for ai in a),
                               self.output_multiplier, eps, tuple(lr * m for m in mult),
                               self.branch, self.skips, self._finite_bias(n, lr, eps[0]))

    def _finite_bias(self, n: int, lr: float, eps1: float) -> FiniteConstants | None:
        """The biases' width-n numbers: the input layer's powers of n for the hidden ones
        (a weight with input 1, docs/theory.md §13), none for the readout's."""
        if self.bias is None:
            return None
        a, b, c = (x[0] for x in self.param._fractions)
        L, mult = self.L, self.bias_lr_mult
        hidden = lambda v, last: tuple(v[:L]) + (last,)  # noqa: E731
        init = tuple(s * n ** -float(a + b) for s in self.bias.sigmas(L)) + (0.0,)
        return FiniteConstants(
            n, init, hidden([lr * m * n ** -float(2 * a + c) for m in mult], lr * mult[L]),
            hidden([lr * m * n ** -float(c) for m in mult], lr * mult[L]),
            (n ** -float(a),) * L + (1.0,), self.output_multiplier, (eps1,) * L + (1.0,),
            tuple(lr * m for m in mult), self.branch, self.skips)

    def limit_constants(self, lr: float) -> LimitConstants:
        """The numbers of the feature-learning limit (docs/theory.md §5.1)."""
        sw = self.param.classify().limit_switches
        if sw is None:
            raise SpecError(f"{self.param.label} is not in the feature-learning regime; "
                            "its limit has no feature-learning constants")
        switches = list(sw.train_layers) + [sw.readout_update]
        mult = self.effective_lr_mult
        eta = tuple(lr * m * float(e) for m, e in zip(mult, switches))
        bias = None
        if self.bias is not None:        # the input layer's switch; the readout's always on
            bm, e1 = self.bias_lr_mult, float(switches[0])
            bias = LimitConstants(self.bias.sigmas(self.L) + (0.0,),
                                  tuple(lr * m * e1 for m in bm[:-1]) + (lr * bm[-1],),
                                  self.output_multiplier, False, tuple(lr * m for m in bm),
                                  self.branch, self.skips)
        return LimitConstants(self.limit_sigma, eta, self.output_multiplier,
                              bool(sw.readout_init), tuple(lr * m for m in mult), self.branch,
                              self.skips, bias)
