"""``to_torch`` and ``from_torch``: this package's finite network as a PyTorch module and
optimizer that train exactly as :func:`~tp_limits.train_finite` does, and a `mup`
module read back into :func:`~tp_limits.from_mup` (docs/interop.md §2).

Torch (and `mup`) are optional and imported only when these functions are called.

The module holds W^1..W^L as they are here (bias-free ``nn.Linear``) and the readout as
P = W^{L+1} / r: r = 1 with an explicit factor α in the forward pass, or, with `mup`
installed and a base width given, a ``MuReadout(output_mult=α)`` after
``set_base_shapes``, which applies α n0/n, so r = n0/n.  The optimizer's parameter
groups carry each layer's numbers (docs/interop.md §2):

* SGD: lr = γ_l / r_l² (γ_l the W-space rate of FiniteConstants), momentum μ, Nesterov,
  weight_decay = δ_l / lr (δ_l the per-step shrink): torch's buffer is this package's D
  divided by lr, and the decay term enters it as here;
* Adam (torch's AdamW, decoupled decay first): lr = n^{-a_l} η_l n^{-c_l} / r_l, eps =
  ε n^{-g_l} r_l / n^{-a_l} (the gradient of P is r_l n^{a_l} times the w-gradient,
  and Adam's direction is unchanged when ε scales with the gradient),
  weight_decay = δ_l / lr;
* a learning-rate schedule: a ``LambdaLR`` with the routine's factors η_t / η, which
  scales each group's rate and leaves the optimizer's state alone, as every engine
  here does (docs/theory.md §10.9);
* a routine in phases: ``TorchModel.train`` turns ``requires_grad`` off for the weights a
  step leaves frozen, so torch's optimizer skips them — no step, no decay, no state — as
  every engine here does (docs/theory.md §10.10).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..engine.backend import get_backend
from ..engine.memory import require_memory
from ..engine.options import check_seed
from ..errors import SpecError
from ..finite.network import FiniteNetwork
from ..spec import MLP, SGD, Problem, Routine
from ..spec.checks import check_int, check_width
from .mup_config import TORCH_NONLINEARITIES, MupTranslation, from_mup


def _import_torch():
    try:
        import torch
    except ImportError:
        raise SpecError("to_torch/from_torch need PyTorch: pip install 'tp_limits[torch]' "
                        "(or pip install torch)") from None
    return torch


def _import_mup():
    try:
        import mup
    except ImportError:
        return None
    return mup


@dataclass
class TorchModel:
    """A torch ``module`` and ``optimizer`` that train as :func:`~tp_limits.train_finite`,
    the per-example ``loss`` (this package's: batch mean, mse = ½ Σ over outputs), and
    :meth:`train` to run a :class:`~tp_limits.Routine` on them; ``scheduler``, a
    ``LambdaLR`` stepped after each optimizer step, when the routine has a learning-rate
    schedule (None otherwise)."""

    module: object
    optimizer: object
    loss: object
    scheduler: object = None

    def train(self, routine: Routine, net: MLP) -> np.ndarray:
        """Train on ``routine``'s batches; return f_eval (T+1, E, d_out) as train_finite
        records it (the evaluation inputs before the first step and after each)."""
        torch = _import_torch()
        problem = Problem(net, routine)
        Xe = torch.tensor(problem.eval_inputs, dtype=torch.float64)
        out = np.zeros((problem.T + 1, problem.E, net.d_out))
        with torch.no_grad():
            out[0] = self.module(Xe).numpy()
        weights = [layer.weight for layer in (*self.module.hidden, self.module.readout)]
        for t in range(problem.T):
            Xb, Yb = (torch.tensor(a, dtype=torch.float64) for a in problem.batch(t))
            # a routine's phases (docs/theory.md §10.10): a frozen weight gets no gradient,
            # so the optimizer skips it (no step, no decay, no state), as train_finite does
            for l, w in enumerate(weights):
                w.requires_grad_(bool(problem.clocks.trains("W", l, t)))
            self.optimizer.zero_grad(set_to_none=True)
            self.loss(self.module(Xb), Yb).backward()
            self.optimizer.step()
            if self.scheduler is not None:
                self.scheduler.step()
            with torch.no_grad():
                out[t + 1] = self.module(Xe).numpy()
        return out


def _activation(torch, phi: str):
    by_name = {v: k for k, v in TORCH_NONLINEARITIES.items()}
    if phi in by_name:
        return getattr(torch.nn, by_name[phi])()
    if phi == "erf":
        class Erf(torch.nn.Module):
            def forward(self, x):
                return torch.erf(x)
        return Erf()
    raise SpecError(f"no torch module for the nonlinearity {phi!r}")


def _loss(torch, name: str):
    if name == "mse":
        return lambda f, y: 0.5 * ((f - y) ** 2).sum(dim=1).mean()
    if name == "sgns":
        return lambda f, y: (y.abs() * torch.nn.functional.softplus(f)
                             - y.clamp(min=0) * f).sum(dim=1).mean()
    return lambda f, y: torch.nn.functional.cross_entropy(f, y)


class _TorchOps:
    """The walk's operations on torch tensors (spec/program.py, ``representation =
    "torch"``): the module's own layers forward; autograd takes the way back."""

    representation = "torch"

    def __init__(self, module):
        self.m = module

    def product(self, l, x):
        return self.m.hidden[l](x)

    def residual(self, h_skip, c, v):
        return h_skip + c * v

    def pre_activation(self, l, h):
        return h

    def activation(self, l, n):
        return self.m.act(n)

    def identity(self, l, n):
        return n

    def readout(self, x):
        return self.m.readout(x)

    def finish_output(self, f):
        return self.m.alpha * f


def _module_class(torch):
    class TPMLP(torch.nn.Module):
        """x ↦ α_r P φ(W^L ... φ(W^1 x)), bias-free, float64, through the network's program
        (spec/program.py): a residual block's output is h^{s} + c W x (docs/theory.md
        §12), a normalized layer's activation φ(N(h)) (§14)."""

        def __init__(self, d_in, width, d_out, L, phi, readout, program):
            super().__init__()
            sizes = [d_in] + [width] * L
            self.hidden = torch.nn.ModuleList(
                torch.nn.Linear(sizes[l], sizes[l + 1], bias=False, dtype=torch.float64)
                for l in range(L))
            self.act = _activation(torch, phi)
            self.readout = readout(width, d_out)
            self.alpha = 1.0                  # the plain readout's factor (α; 1 with MuReadout)
            self.program = program

        def forward(self, x):
            ops = _TorchOps(self)
            return self.program.output(self.program.forward(x, ops)[1][-1], ops)
    return TPMLP


def to_torch(net: MLP, width: int, seed: int = 0, routine: Routine | None = None,
             base_width: float | None = None) -> TorchModel:
    """A :class:`TorchModel` (float64) with the initial weights of
    ``train_finite(net, routine, width, seed=seed)`` and a torch optimizer that takes
    the same steps under ``routine``'s optimizer and learning rate (without a routine:
    plain SGD at η = 1).  With ``base_width`` (n0) and `mup` installed, the readout is
    a ``mup.MuReadout`` and the model has ``set_base_shapes`` from a base model of
    hidden width n0 (a genuine mup model; its weights and rates are still this
    package's).  See the module docstring for the numbers."""
    if not isinstance(net, MLP):
        raise SpecError(f"net must be a tp.MLP, got {type(net).__name__}")
    refusal = net.program.refusal("torch")
    if refusal:
        raise SpecError(refusal)
    n = check_width(width)
    check_seed(seed)
    if routine is not None and not isinstance(routine, Routine):
        raise SpecError(f"routine must be a tp.Routine or None, got {type(routine).__name__}")
    mup = _import_mup() if base_width is not None else None
    if base_width is not None and mup is None:
        raise SpecError("base_width needs the mup package (pip install mup); without it "
                        "leave base_width=None")
    problem = Problem(net, routine) if routine is not None else None
    lr = routine.lr if routine is not None else 1.0
    opt = problem.optimizer if problem is not None else None
    if opt is not None and opt.rule.name not in TORCH_RULES:
        raise SpecError(f"to_torch has no torch optimizer for {opt}: it builds SGD (with "
                        "momentum or Nesterov) and AdamW; train this network with "
                        "tp.train_finite")
    torch = _import_torch()
    # this package's network, and the torch module's copy of its weights beside it
    weights = FiniteNetwork.bytes_needed(net, n, np.float64, "exact", opt or SGD(), False)
    require_memory(2 * weights, f"to_torch at width {n} (the weights drawn here and the "
                   "torch module's copy)", get_backend("numpy"), advice="lower the width")
    nw = FiniteNetwork(net, n, lr, seed, get_backend("numpy"), np.float64, optimizer=opt)
    const, alpha, L = nw.const, net.output_multiplier, net.L
    TPMLP = _module_class(torch)
    if mup is None:
        model = TPMLP(net.d_in, n, net.d_out, L, net.phi,
                      lambda i, o: torch.nn.Linear(i, o, bias=False, dtype=torch.float64),
                      net.program)
        model.alpha, r = alpha, 1.0
    else:
        n0 = check_int(base_width, "base_width")

        def readout(i, o):
            return mup.MuReadout(i, o, bias=False, output_mult=alpha, dtype=torch.float64)
        model = TPMLP(net.d_in, n, net.d_out, L, net.phi, readout, net.program)
        base = TPMLP(net.d_in, n0, net.d_out, L, net.phi, readout, net.program)
        mup.set_base_shapes(model, base, rescale_params=False)
        r = n0 / n
    layers = list(model.hidden) + [model.readout]
    scale = [1.0] * L + [r]
    with torch.no_grad():
        for layer, W, s in zip(layers, nw.W, scale):
            layer.weight.copy_(torch.as_tensor(W / s))
    optimizer = _optimizer(torch, nw.opt, const, layers, scale)
    scheduler = None
    if routine is not None and routine.lr_factors is not None:
        # torch's schedulers scale each group's rate, as the schedule scales η here
        factors = routine.lr_factors.tolist()
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda t: factors[min(t, len(factors) - 1)])
    return TorchModel(model, optimizer,
                      _loss(torch, problem.loss.name if problem is not None else "mse"),
                      scheduler)


#: the coordinate rules to_torch builds a torch optimizer for (SGD's three, then Adam)
TORCH_RULES = ("sgd", "heavy_ball", "nesterov", "adam")


def _optimizer(torch, opt, const, layers, scale):
    """The torch optimizer of the module docstring, one parameter group per layer."""
    shrink = opt.shrinks(const.decay)
    groups = []
    if opt.rule.name in TORCH_RULES[:3]:
        for l, (layer, r) in enumerate(zip(layers, scale)):
            rate = const.lr[l] / r ** 2
            groups.append(dict(params=[layer.weight], lr=rate,
                               weight_decay=shrink[l] / rate if rate else 0.0))
        return torch.optim.SGD(groups, lr=groups[0]["lr"], momentum=opt.momentum,
                               nesterov=opt.nesterov)
    if opt.rule.name == "adam":
        for l, (layer, r) in enumerate(zip(layers, scale)):
            rate = const.w_scale[l] * const.adam_lr[l] / r
            eps = opt.eps * const.eps_scale[l] * r / const.w_scale[l]
            groups.append(dict(params=[layer.weight], lr=rate, eps=eps,
                               weight_decay=shrink[l] / rate if rate else 0.0))
        return torch.optim.AdamW(groups, lr=groups[0]["lr"], betas=opt.betas)
    raise SpecError(f"to_torch has no torch optimizer for {opt}")


def from_torch(module, lr: float, optimizer: str = "MuSGD",
               optimizer_settings: dict | None = None, loss: str = "MSELoss",
               init_std=None) -> MupTranslation:
    """Read a `mup` MLP (bias-free ``nn.Linear`` layers, one activation module, a
    ``MuReadout``, ``set_base_shapes`` called) into :func:`from_mup`: its widths, base
    widths (from the weights' ``infshape``), ``output_mult`` and nonlinearity; the
    optimizer, learning rate and loss are given as to from_mup.  ``init_std``: the
    stds given to ``mup.init.normal_`` (None: estimated from the current weights,
    which is exact only in distribution, so pass them when known)."""
    torch = _import_torch()
    if _import_mup() is None:
        raise SpecError("from_torch reads mup models: pip install mup")
    if not isinstance(module, torch.nn.Module):
        raise SpecError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    acts = {type(m).__name__ for m in module.modules()
            if type(m).__name__ in TORCH_NONLINEARITIES or type(m).__name__ == "Erf"}
    for name, m in module.named_modules():
        plain = isinstance(m, torch.nn.Linear) or type(m).__name__ in acts
        if not plain and not any(True for _ in m.children()):
            raise SpecError(f"from_torch reads plain stacks of nn.Linear layers with one "
                            f"activation; the module has {name} ({type(m).__name__}), which it "
                            "cannot read")
    if len(linears) < 2 or type(linears[-1]).__name__ != "MuReadout":
        raise SpecError("from_torch needs nn.Linear layers ending in a mup.MuReadout")
    if any(m.bias is not None for m in linears):
        raise SpecError("the networks here have no biases: build the mup model with "
                        "bias=False")
    if len(acts) != 1:
        raise SpecError(f"from_torch needs exactly one kind of activation module, found "
                        f"{sorted(acts) or 'none'}")
    if not all(hasattr(m.weight, "infshape") for m in linears):
        raise SpecError("call mup.set_base_shapes(module, base) first (no infshape found)")
    act = acts.pop()
    phi = "erf" if act == "Erf" else TORCH_NONLINEARITIES[act]
    hidden, readout = linears[:-1], linears[-1]
    width = hidden[0].weight.shape[0]
    _check_plain_stack(torch, module, linears, width)
    # a dimension equal to its base is finite for mup (base_dim None): base = width there
    bases = [m.weight.infshape[0].base_dim or m.weight.infshape[0].dim for m in hidden]
    if init_std is None:
        mults = [1.0] + [m.weight.infshape.width_mult() for m in hidden[1:]]
        init_std = [float(m.weight.detach().std()) * math.sqrt(w)
                    for m, w in zip(hidden, mults)] + [float(readout.weight.detach().std())]
    return from_mup(hidden[0].weight.shape[1], width, readout.weight.shape[0],
                    hidden_layers=len(hidden), base_width=bases, init_std=init_std,
                    output_mult=readout.output_mult, nonlinearity=phi, optimizer=optimizer,
                    lr=lr, optimizer_settings=optimizer_settings, loss=loss)


def _check_plain_stack(torch, module, linears, width: int) -> None:
    """The module is the plain stack of its Linear layers in the order they are registered,
    of one hidden width: shapes chained, and its forward on a probe equal to that stack's
    (a skip, a reordering or other arithmetic in ``forward`` would not be read)."""
    for k, (a, b) in enumerate(zip(linears, linears[1:])):
        if b.in_features != a.out_features:
            raise SpecError(f"from_torch reads the Linear layers in the order they are "
                            f"registered: layer {k + 1} has {b.in_features} inputs but layer "
                            f"{k} has {a.out_features} outputs")
    widths = sorted({m.out_features for m in linears[:-1]})
    if widths != [width]:
        raise SpecError(f"from_torch reads networks of one hidden width; the hidden layers "
                        f"have widths {widths}")
    act = next(m for m in module.modules() if not isinstance(m, torch.nn.Linear)
               and not any(True for _ in m.children()))
    w = linears[0].weight
    x = torch.randn(3, linears[0].in_features, dtype=w.dtype,
                    generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got = module(x)
        h = x
        for m in linears[:-1]:
            h = act(m(h))
        want = linears[-1](h)
    if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-9, atol=1e-12):
        raise SpecError("from_torch reads a module whose forward is its Linear layers applied "
                        "in the order registered with the activation between them; this "
                        "module's forward computes something else (skip connections, layers "
                        "in another order, or other arithmetic), which it cannot read")

