"""Training a finite transformer: the loss, the optimizers' steps at width n, and the run
that returns a :class:`~tp_limits.Trajectory` (docs/theory.md §17.1–17.2).

The loss is the cross-entropy of the next word averaged over every position
(``loss="next_token"``) or of the target at the last position (``"last"``); a step is full
batch.  SGD moves a parameter of kind k by −η n^{−c_k} ∇; Adam by −η n^{−c_k} ψ with
ψ = m̂/(√v̂ + ε) on the gradient rescaled by n^{g_k}, so that ε is width-free
(:mod:`.parametrization`).
"""
from __future__ import annotations

import numpy as np

from ..engine.options import check_seed
from ..engine.progress import progress_bar
from ..engine.status import Divergence, RunStatus
from ..engine.trajectory import Trajectory
from ..errors import DivergenceError, SpecError
from ..spec.checks import check_choice, check_int, check_width, finite_positive
from ..spec.optimizers.adam import Adam
from ..spec.optimizers.sgd import SGD
from .model import BLOCKS, Transformer
from .network import backward, forward, init_params
from .parametrization import gradient_exponent, learning_rate, rate_exponent
from .tasks import TokenTask


def scored(model: Transformer, f, targets):
    """(logits, labels) of the scored positions: every position, or the last."""
    if model.loss == "last":
        return f[:, -1, :], targets[:, -1]
    return f.reshape(-1, f.shape[-1]), targets.reshape(-1)


def scored_rows(model: Transformer, tokens) -> int:
    """How many positions of the sequences ``tokens`` (B, S) the loss scores."""
    return len(tokens) if model.loss == "last" else tokens.size


def loss_and_gradient(model: Transformer, f, targets):
    """(mean cross-entropy over the scored positions, ∂loss/∂f of the shape of f)."""
    z, y = scored(model, f, targets)
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    m = len(y)
    loss = -float(logp[np.arange(m), y].mean())
    chi = np.exp(logp)
    chi[np.arange(m), y] -= 1.0
    chi /= m
    df = np.zeros_like(f)
    if model.loss == "last":
        df[:, -1, :] = chi
    else:
        df[...] = chi.reshape(f.shape)
    return loss, df


def check_optimizer(optimizer, model: Transformer | None = None) -> str:
    """"sgd" or "adam", or a SpecError naming ``optimizer`` for what transformers do not
    take (momentum, weight decay, other optimizers) or what ``model``'s parametrization has
    no rates for (Adam with param = 'ntk')."""
    if isinstance(optimizer, SGD) and optimizer.momentum == 0 and not optimizer.weight_decay:
        name = "sgd"
    elif isinstance(optimizer, Adam) and not optimizer.weight_decay:
        name = "adam"
    else:
        raise SpecError(f"optimizer = {optimizer!r}: transformers train with plain SGD() or "
                        "Adam(betas=..., eps=...) without weight decay")
    if model is not None:
        rate_exponent(model.param, name, "hidden")
    return name


class Stepper:
    """The optimizer's state over the parameters of one network at width ``n``."""

    def __init__(self, model: Transformer, optimizer, lr: float, n: int, params: dict):
        self.name = check_optimizer(optimizer, model)
        self.optimizer, self.n = optimizer, n
        kinds = model.parameter_kinds()
        self.rate = {p: learning_rate(model, self.name, k, lr, n) for p, k in kinds.items()}
        self.unit = {p: float(n) ** float(gradient_exponent(model.param, k))
                     for p, k in kinds.items()}
        self.state = ({p: (np.zeros_like(W), np.zeros_like(W)) for p, W in params.items()}
                      if self.name == "adam" else None)

    def step(self, params: dict, grads: dict, t: int) -> None:
        """Update ``params`` in place by their ``t``-th step (t = 1, 2, …)."""
        for p, W in params.items():
            if self.name == "sgd":
                W -= self.rate[p] * grads[p]
            else:
                psi = self.optimizer.direction(self.state[p], grads[p] * self.unit[p], t, np)
                W -= self.rate[p] * psi


def _check_finite(fw, t: int, bound) -> None:
    """A DivergenceError at step ``t`` for the first block whose logits or residual stream
    is not finite or beyond ``bound``, then the output."""
    checks = [(k + 1, q, c[key]) for k, c in enumerate(fw.blocks)
              for q, key in (("attention logits", "logits"), ("residual stream", "h"))
              if key in c]
    for layer, quantity, x in checks + [(None, "output f", fw.f)]:
        size = float(np.max(np.abs(x))) if x.size else 0.0
        if not np.isfinite(size) or (bound is not None and size > bound):
            raise DivergenceError(t, layer, quantity, BLOCKS, size=size,
                                  bound=bound)


def train_transformer(model: Transformer, task: TokenTask, width: int, lr: float,
                      optimizer=None, steps: int = 10, seed: int = 0,
                      on_divergence: str = "raise", divergence_bound: float | None = 1e10,
                      progress: bool = False) -> Trajectory:
    """Train ``model`` at width ``width`` on ``task`` for ``steps`` full-batch steps of
    ``optimizer`` (default SGD()) at the rate η = ``lr`` (times n^{−c} per parameter kind).

    Returns a Trajectory: ``f_eval`` (T+1, E, V) on the evaluation sequences' scored
    positions, ``f_train`` (T, B, V), ``loss`` (T,), ``stats['eval_loss']`` (T+1,).  Ctrl-C
    keeps the finished steps (``interrupted``); a divergence raises, or with
    ``on_divergence='stop'`` returns the steps before it with ``divergence`` set.
    """
    optimizer = SGD() if optimizer is None else optimizer
    name = check_optimizer(optimizer, model)
    model.check_task(task)
    width, steps = check_width(width), check_int(steps, "steps", 0)
    lr, seed = finite_positive(lr, "lr"), check_seed(seed)
    check_choice(on_divergence, "on_divergence", ("raise", "stop"))
    if divergence_bound is not None:
        divergence_bound = finite_positive(divergence_bound, "divergence_bound")
    model.head_width(width)
    params = init_params(model, width, np.random.default_rng(seed))
    stepper = Stepper(model, optimizer, lr, width, params)
    f_eval, f_train, losses, eval_loss = [], [], [], []
    status = None

    def evaluate():
        fw = forward(model, params, task.eval_tokens)
        f_eval.append(scored(model, fw.f, task.eval_targets)[0])
        eval_loss.append(loss_and_gradient(model, fw.f, task.eval_targets)[0])

    try:
        with np.errstate(over="ignore", invalid="ignore"), progress_bar(   # reported below
                progress, steps, f"transformer n={width}") as on_step:
            evaluate()
            for t in range(1, steps + 1):
                fw = forward(model, params, task.tokens)
                _check_finite(fw, t, divergence_bound)
                loss, df = loss_and_gradient(model, fw.f, task.targets)
                stepper.step(params, backward(model, params, fw, df), t)
                f_train.append(scored(model, fw.f, task.targets)[0])
                losses.append(loss)
                evaluate()
                on_step(t)
    except KeyboardInterrupt:
        status = RunStatus(len(losses), interrupted=True)
    except DivergenceError as error:
        if on_divergence == "raise":
            raise
        status = RunStatus(len(losses), divergence=Divergence.of(error))
    T = len(losses)
    V = model.vocab
    return Trajectory(
        f_eval=np.asarray(f_eval[:T + 1]),
        f_train=np.asarray(f_train).reshape(T, scored_rows(model, task.tokens), V),
        loss=np.asarray(losses),
        stats={"eval_loss": np.asarray(eval_loss[:T + 1])},
        meta={"engine": "finite transformer", "width": width, "seed": seed, "lr": lr,
              "optimizer": name},
        status=status or RunStatus(T))
