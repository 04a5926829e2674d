"""``from_mup``: a network configured with the `mup` package, as this package's
:class:`~tp_limits.MLP` and training pieces (docs/interop.md).

A `mup` user has an MLP of hidden width n with base widths n0_l (``set_base_shapes``),
weights drawn by ``mup.init.normal_(W, std=s_l)``, a ``MuReadout`` with
``output_mult`` α, and one global learning rate η for ``MuSGD`` / ``MuAdam`` /
``MuAdamW``.  Written in this package's terms (docs/interop.md §1 derives each line),
with μP in its TP4 form (tp.mup) and W^{L+1} = (n0_L / n) W_out the readout that
``MuReadout`` applies:

=========  ===========================  ==========================  ======================
layer      σ_l (init constant)          lr_mult_l, MuSGD            lr_mult_l, MuAdam(W)
=========  ===========================  ==========================  ======================
input      s_1                          1 / n0_1                    1
hidden l   s_l √n0_{l-1}                n0_{l-1} / n0_l             n0_{l-1}
readout    s_{L+1} n0_L                 n0_L                        n0_L
=========  ===========================  ==========================  ======================

readout_multiplier = α, base rate η.  ``MSELoss`` (mean over batch and outputs) is
this package's ``mse`` (½ Σ over outputs, batch mean) times 2/d_out, so SGD's rate is
multiplied by k = 2/d_out (Adam is invariant to the scale but for ε, divided by k);
``CrossEntropyLoss`` is ``xent``.  Torch's Adam ε on a layer whose gradient is k_l
times this package's w-gradient is k_l ε n^{-g_l} (docs/theory.md §10.3): ε/n on the
input and hidden layers, ε n0_L / n on the readout under μP.  A fixed torch ε is
therefore not width-free: the package's ε is torch's ε · n (at the width given), and
exactly so on the readout only for n0_L = 1.  Weight decay shrinks every layer by
η·λ_torch per step under MuSGD and MuAdamW, while the package's width-free λ shrinks
layer l by η lr_mult_l λ: one λ matches only where every lr_mult_l is 1 (n0 = 1).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from ..abc.parametrization import ABC
from ..abc.presets import mup as mup_preset
from ..errors import SpecError
from ..nonlinearities import NONLINEARITIES
from ..spec import MLP, Routine
from ..spec.checks import (check_bool, check_int, check_width, finite_non_negative, finite_positive,
                           unit_interval)
from ..spec.optimizers import SGD, Adam

#: torch.nn loss names and this package's losses (from_mup scales for MSELoss, which
#: averages over the d_out outputs too)
LOSSES = {"MSELoss": "mse", "CrossEntropyLoss": "xent"}
#: the mup optimizers and the update rule each follows
OPTIMIZERS = {"musgd": "sgd", "sgd": "sgd", "muadam": "adam", "adam": "adam",
              "muadamw": "adamw", "adamw": "adamw"}
#: torch.nn activation names and this package's nonlinearities
TORCH_NONLINEARITIES = {"ReLU": "relu", "Tanh": "tanh", "GELU": "gelu", "SiLU": "silu",
                        "Sigmoid": "sigmoid", "Softplus": "softplus", "Identity": "id"}
def _pair_of_betas(value, name):
    if isinstance(value, (str, set)) or not hasattr(value, "__len__") or len(value) != 2:
        raise SpecError(f"{name} = {value!r} must be a pair (β₁, β₂)")
    return tuple(unit_interval(v, f"{name}[{i}]") for i, v in enumerate(value))


#: torch's optimizer settings that have a counterpart here, each with its check (the
#: message names the setting as the user gave it)
_CHECKS = {"momentum": unit_interval, "nesterov": check_bool,
           "weight_decay": finite_non_negative, "dampening": finite_non_negative,
           "betas": _pair_of_betas, "eps": finite_non_negative, "amsgrad": check_bool}
_SGD_KEYS = {"momentum", "nesterov", "weight_decay", "dampening"}
_ADAM_KEYS = {"betas", "eps", "weight_decay", "amsgrad"}


@dataclass(frozen=True)
class MupTranslation:
    """A `mup` configuration in this package's terms: ``net`` (the MLP), ``lr`` (the base
    rate η), ``optimizer`` and ``loss`` for :class:`~tp_limits.Routine`, the per-layer
    ``table`` of the mapping, and ``notes`` on the user's settings that are not
    width-free.  :meth:`routine` builds the Routine on data; ``str()`` explains it."""

    net: MLP
    lr: float
    optimizer: object
    loss: str
    width: int
    table: tuple
    notes: tuple

    def routine(self, X, Y, **kwargs) -> Routine:
        """The :class:`~tp_limits.Routine` of this configuration on (X, Y); ``kwargs``
        (batch_size, steps, eval_inputs, ...) as for Routine."""
        for key in ("lr", "loss", "optimizer"):
            if key in kwargs:
                raise SpecError(f"{key}= comes from the mup configuration; build the "
                                "Routine yourself to change it")
        return Routine(X, Y, lr=self.lr, loss=self.loss, optimizer=self.optimizer, **kwargs)

    def __str__(self) -> str:
        rows = "; ".join(f"{name}: σ = {s:.6g}, lr_mult = {m:.6g}" for name, s, m in self.table)
        text = (f"The mup model of width {self.width} is tp.MLP({self.net.param.label}, "
                f"d_in={self.net.d_in}, d_out={self.net.d_out}, phi={self.net.phi!r}) with "
                f"readout_multiplier = output_mult = {self.net.readout_multiplier:.6g} and "
                f"base rate η = {self.lr:.6g}, trained by {self.optimizer} on the "
                f"{self.loss!r} loss. Per layer ({rows}): the init stds of mup.init.normal_ "
                "times √(base fan-in) for hidden matrices and times the base width for the "
                "readout (MuReadout divides its input by n/n0), and mup's per-group "
                "learning rates as multiples of η (docs/interop.md).")
        if self.notes:
            text += " Not width-free: " + " ".join(self.notes)
        return text


def _bases(base_width, L: int) -> tuple:
    if isinstance(base_width, numbers.Real):
        return (finite_positive(base_width, "base_width"),) * L
    try:
        vals = tuple(finite_positive(v, f"base_width[{i}]") for i, v in enumerate(base_width))
    except TypeError:
        raise SpecError(f"base_width = {base_width!r} must be a number or one per hidden "
                        "layer") from None
    if len(vals) != L:
        raise SpecError(f"base_width has {len(vals)} entries; give one per hidden layer ({L})")
    return vals


def _stds(init_std, L: int) -> tuple:
    if isinstance(init_std, numbers.Real):
        init_std = (init_std,) * (L + 1)
    try:
        vals = list(init_std)
    except TypeError:
        raise SpecError(f"init_std = {init_std!r} must be a number or one std per layer "
                        f"(input, hidden..., readout: {L + 1})") from None
    if len(vals) != L + 1:
        raise SpecError(f"init_std has {len(vals)} entries; give one per layer 1..L+1 ({L + 1})")
    out = tuple(finite_positive(v, f"init_std[{i}]") for i, v in enumerate(vals[:-1]))
    last = vals[-1]
    if not (isinstance(last, numbers.Real) and math.isfinite(last) and last >= 0):
        raise SpecError(f"init_std[{L}] (the readout) = {last!r} must be >= 0 (0: a zero "
                        "readout, mup's readout_zero_init=True)")
    return out + (float(last),)


def _settings(kind: str, settings: dict | None) -> dict:
    if settings is not None and not isinstance(settings, dict):
        raise SpecError(f"optimizer_settings = {settings!r} must be a dict of torch's "
                        "optimizer keyword arguments, or None")
    settings = {k: _CHECKS[k](v, f"optimizer_settings[{k!r}]") if k in _CHECKS else v
                for k, v in (settings or {}).items()}
    allowed = _SGD_KEYS if kind == "sgd" else _ADAM_KEYS
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise SpecError(f"optimizer_settings {unknown} are not settings of torch's "
                        f"{'SGD' if kind == 'sgd' else 'Adam'}; known: {sorted(allowed)}")
    if settings.get("dampening", 0.0) != 0.0:
        raise SpecError("dampening != 0 has no counterpart here (momentum buffers add the "
                        "whole gradient); use dampening=0")
    if settings.get("amsgrad", False):
        raise SpecError("amsgrad=True has no counterpart here; use amsgrad=False")
    return settings


def from_mup(d_in: int, width: int, d_out: int, hidden_layers: int = 1, base_width=1,
             init_std=1.0, output_mult: float = 1.0, nonlinearity: str = "relu",
             optimizer: str = "MuSGD", lr: float = 0.1, optimizer_settings: dict | None = None,
             loss: str = "MSELoss") -> MupTranslation:
    """This package's network and training pieces for a `mup` MLP (docs/interop.md).

    The mup model: ``hidden_layers`` (L) bias-free ``nn.Linear`` layers of width
    ``width`` (n) after the input (d_in) and a bias-free ``MuReadout(n, d_out,
    output_mult=...)``, ``set_base_shapes`` with hidden widths ``base_width`` (n0_l: one
    number, or one per hidden layer), weights from ``mup.init.normal_(W, std=s_l)`` with
    ``init_std`` = (s_1, ..., s_{L+1}) (one number: the same for all; s_{L+1} = 0 is
    ``readout_zero_init=True``), the activation ``nonlinearity`` (this package's name or
    torch's class name, e.g. "ReLU"), ``optimizer`` ("MuSGD", "MuAdam", "MuAdamW") with
    global learning rate ``lr`` and torch's ``optimizer_settings`` (momentum, nesterov,
    weight_decay; betas, eps), and ``loss`` as torch.nn names it ("MSELoss",
    "CrossEntropyLoss", mean reduction).

    Returns a :class:`MupTranslation`: σ_l, lr_mult_l, α and η of the table in this
    module's docstring (finite networks of this package then train exactly as mup's,
    docs/interop.md §2), and notes on what is not width-free (a fixed Adam ε, weight
    decay with n0 ≠ 1, which is refused, since no width-free λ reproduces it).
    """
    L = check_int(hidden_layers, "hidden_layers")
    n = check_width(width)
    d_in, d_out = check_int(d_in, "d_in"), check_int(d_out, "d_out")
    b = _bases(base_width, L)
    s = _stds(init_std, L)
    alpha = output_mult
    if not (isinstance(alpha, numbers.Real) and math.isfinite(alpha) and alpha != 0):
        raise SpecError(f"output_mult = {alpha!r} must be a finite nonzero number")
    phi = TORCH_NONLINEARITIES.get(nonlinearity, nonlinearity)
    if phi not in NONLINEARITIES:
        raise SpecError(f"unknown nonlinearity {nonlinearity!r}; choose one of "
                        f"{sorted(NONLINEARITIES)} or torch's {sorted(TORCH_NONLINEARITIES)}")
    kind = OPTIMIZERS.get(str(optimizer).lower()) if isinstance(optimizer, str) else None
    if kind is None:
        raise SpecError(f"optimizer = {optimizer!r}; choose 'MuSGD', 'MuAdam' or 'MuAdamW'")
    if loss not in LOSSES:
        raise SpecError(f"loss = {loss!r}; choose one of {sorted(LOSSES)} (torch.nn names, "
                        "mean reduction)")
    eta = finite_positive(lr, "lr")
    settings = _settings("sgd" if kind == "sgd" else "adam", optimizer_settings)
    if loss == "CrossEntropyLoss" and d_out < 2:
        raise SpecError(f"loss = 'CrossEntropyLoss' with d_out = {d_out}: a cross-entropy over "
                        "one class is constant; give d_out >= 2 classes (or MSELoss)")
    k = 2.0 / d_out if loss == "MSELoss" else 1.0      # torch loss gradient / this package's

    sigma = (s[0],) + tuple(s[l] * math.sqrt(b[l - 1]) for l in range(1, L)) + (s[L] * b[L - 1],)
    if kind == "sgd":
        mult = (1 / b[0],) + tuple(b[l - 1] / b[l] for l in range(1, L)) + (b[L - 1],)
    else:
        mult = (1.0,) + tuple(b[l - 1] for l in range(1, L)) + (b[L - 1],)
    param = mup_preset(L, optimizer="sgd" if kind == "sgd" else "adam")
    if s[L] == 0.0:
        param = ABC(param.a, list(param.b[:-1]) + ["oo"], param.c, param.optimizer,
                    name=f"{param.label}, zero readout")
        sigma = sigma[:-1] + (1.0,)
    notes = []
    wd = float(settings.get("weight_decay", 0.0))
    if kind == "adam" and wd:
        raise SpecError("MuAdam's weight_decay is an L2 term added to the gradient (torch "
                        "Adam); this package's Adam decay is decoupled: use MuAdamW")
    if wd and len({round(m, 12) for m in mult}) > 1:
        raise SpecError(f"{optimizer} shrinks every layer by lr·weight_decay per step, while a "
                        "width-free weight decay λ shrinks layer l by η·lr_mult_l·λ, and the "
                        f"lr_mult_l here differ ({', '.join(f'{m:.4g}' for m in mult)}): no λ "
                        "reproduces it; use base_width=1 or weight_decay=0")
    if kind == "sgd":
        rate = eta * k
        opt = SGD(momentum=float(settings.get("momentum", 0.0)),
                  weight_decay=wd / (k * mult[0]) if wd else 0.0,
                  nesterov=bool(settings.get("nesterov", False)))
    else:
        rate = eta
        eps_t = float(settings.get("eps", 1e-8))
        eps = eps_t * n / k                       # width-free ε on the input and hidden layers
        if eps_t:
            notes.append(f"torch's fixed eps = {eps_t:g} is the width-free ε = eps·n = "
                         f"{eps:.6g} at width {n}: it grows like n, so the networks of a "
                         "width sweep do not share one limit (eps shrinking like 1/n would)"
                         + (f"; on the readout torch's eps is ε·n0/n, so there it acts as "
                            f"ε/{b[L - 1]:g}" if b[L - 1] != 1 else "") + ".")
        betas = tuple(settings.get("betas", (0.9, 0.999)))
        opt = Adam(betas=betas, eps=eps, weight_decay=wd / mult[0] if wd else 0.0)
    if wd:
        notes.append(f"weight_decay = {wd:g} shrinks every layer by lr·weight_decay per step; "
                     "here it is the width-free λ since every lr_mult is 1.")
    net = MLP(param, d_in, d_out, phi=phi, sigma=sigma, lr_mult=mult, readout_multiplier=alpha)
    names = ["input"] + [f"hidden {l + 1}" for l in range(1, L)] + ["readout"]
    table = tuple(zip(names, net.sigma, net.lr_mult))
    return MupTranslation(net, rate, opt, LOSSES[loss], n, table, tuple(notes))
