"""``transformer_to_torch``: this package's finite transformer as a PyTorch module and
optimizer that train exactly as :func:`~tp_limits.transformer.train_transformer` does
(docs/interop.md §2; docs/theory.md §17.1–17.2).

The module holds the effective weights as they are here (E, P, W_Q … W_D per block, the
readout), drawn by the same generator at the same seed.  Its forward pass is the network
of docs/theory.md §17.1 in torch operations (autograd takes the way back).  The
optimizer's parameter groups carry each parameter kind's numbers:

* SGD: lr = η n^{−c_k};
* Adam: lr = η n^{−c_k}, eps = ε n^{−g_k} — this package scales the gradient by n^{g_k}
  before Adam, and Adam's direction m̂/(√v̂ + ε) is unchanged when the gradient and ε
  scale together.

Torch is optional and imported only when called.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.memory import require_memory
from ..engine.options import check_seed
from ..spec.checks import check_int, check_width, finite_positive
from ..transformer.model import Transformer
from ..transformer.network import init_params
from ..transformer.parametrization import gradient_exponent, learning_rate
from ..transformer.tasks import TokenTask
from ..transformer.train import check_optimizer, scored
from .torch_model import _activation, _import_torch


@dataclass
class TorchTransformer:
    """A torch ``module`` (tokens (B, S) → f (B, S, V)) and ``optimizer`` that train as
    :func:`~tp_limits.transformer.train_transformer`; :meth:`train` runs a task on them."""

    module: object
    optimizer: object
    model: Transformer

    def loss(self, f, targets):
        """Cross-entropy of the scored positions (every one, or the last: ``scored``)."""
        return _import_torch().nn.functional.cross_entropy(*scored(self.model, f, targets))

    def train(self, task: TokenTask, steps: int) -> np.ndarray:
        """Full-batch steps on ``task``; returns f_eval (T + 1, E, V) on the evaluation
        sequences' scored positions, as train_transformer records it."""
        torch = _import_torch()
        self.model.check_task(task)
        steps = check_int(steps, "steps", 0)
        x, y = torch.tensor(task.tokens), torch.tensor(task.targets)
        xe = torch.tensor(task.eval_tokens)
        out = []

        def evaluate():
            with torch.no_grad():
                out.append(scored(self.model, self.module(xe), task.eval_targets)[0].numpy())

        evaluate()
        for _ in range(steps):
            self.optimizer.zero_grad(set_to_none=True)
            self.loss(self.module(x), y).backward()
            self.optimizer.step()
            evaluate()
        return np.stack(out)


def _module_class(torch):
    class TPTransformer(torch.nn.Module):
        """The pre-norm transformer of docs/theory.md §17.1 on torch tensors."""

        def __init__(self, model: Transformer, params: dict, width: int):
            super().__init__()
            self.model, self.width = model, width
            self.weights = torch.nn.ParameterDict(
                {k: torch.nn.Parameter(torch.tensor(v, dtype=torch.float64))
                 for k, v in params.items()})
            self.phi = _activation(torch, model.phi)

        def norm(self, h):
            c = h - h.mean(-1, keepdim=True)
            return c / torch.sqrt((c * c).mean(-1, keepdim=True) + self.model.norm_eps)

        def forward(self, tokens):
            m, W, n = self.model, self.weights, self.width
            B, S = tokens.shape
            H = m.heads
            d = n // H
            h = W["E"].T[tokens]
            if m.positions:
                h = h + W["P"].T[:S]
            scale = m.attn_mult * d ** -float(m.attention_exponent or 0)
            for k in range(1, m.blocks + 1):
                if m.attention != "none":
                    a = self.norm(h)
                    q, kk, v = [(a @ W[f"{x}{k}"].T).reshape(B, S, H, d).transpose(1, 2)
                                for x in "QKV"]
                    logits = scale * q @ kk.transpose(-1, -2)
                    if m.causal:
                        mask = torch.tril(torch.ones(S, S, dtype=torch.bool))
                        logits = logits.masked_fill(~mask, -torch.inf)
                    o = (torch.softmax(logits, -1) @ v).transpose(1, 2).reshape(B, S, n)
                    h = h + m.branch_multiplier * o @ W[f"O{k}"].T
                if m.mlp:
                    u = self.norm(h) @ W[f"U{k}"].T
                    h = h + m.branch_multiplier * self.phi(u) @ W[f"D{k}"].T
            out = m.sigma_out / n * W["E"].T if m.tied else W["out"]
            return self.norm(h) @ out.T

    return TPTransformer


def transformer_to_torch(model: Transformer, width: int, lr: float, optimizer=None,
                         seed: int = 0) -> TorchTransformer:
    """A :class:`TorchTransformer` (float64) with the initial weights of
    ``train_transformer(model, task, width, lr, optimizer, seed=seed)`` and a torch
    optimizer (``torch.optim.SGD`` or ``Adam``) that takes the same steps; see the module
    docstring for the numbers."""
    from ..spec.optimizers.sgd import SGD
    optimizer = SGD() if optimizer is None else optimizer
    name = check_optimizer(optimizer, model)
    width = check_width(width)
    lr, seed = finite_positive(lr, "lr"), check_seed(seed)
    model.head_width(width)
    torch = _import_torch()
    kinds = model.parameter_kinds()
    count = sum(np.prod(model.shape(p, width)) for p in kinds)
    require_memory(8.0 * 4 * count, f"transformer_to_torch at width {width} (the weights "
                   "drawn here, the module's copy and the optimizer's state)")
    params = init_params(model, width, np.random.default_rng(seed))
    module = _module_class(torch)(model, params, width)
    groups = []
    for p, kind in kinds.items():
        rate = learning_rate(model, name, kind, lr, width)
        group = {"params": [module.weights[p]], "lr": rate}
        if name == "adam":
            group["eps"] = optimizer.eps * float(width) ** -float(
                gradient_exponent(model.param, kind))
        groups.append(group)
    opt = (torch.optim.SGD(groups, lr=lr) if name == "sgd" else
           torch.optim.Adam(groups, lr=lr, betas=tuple(optimizer.betas)))
    return TorchTransformer(module, opt, model)
