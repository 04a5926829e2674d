"""The kernel regime of a transformer: kernel gradient descent on the tangent kernel of
:mod:`.kernels` (docs/theory.md §17.6).

Under the NTK parametrization the features of an infinitely wide transformer stay where
they start, so its outputs on the training rows and the evaluation rows (all positions)
move by full-batch kernel gradient descent,

    f_{t+1} = f_t − η K(·, train) χ_t,       χ_t = ∂loss/∂f on the training rows,

per output word (K ⊗ I_V), from f_0: 0, or a finite network's own initial outputs
(:func:`transformer_initial_outputs`), so that its distance from that network measures
the kernel's own fluctuation, Θ(n^{−½}).  (Under μP only the first step is a kernel step:
after it the features move, :func:`~.limit.simulate_transformer_limit`.)
"""
from __future__ import annotations

import numpy as np

from ..engine.options import check_seed
from ..engine.status import Divergence, RunStatus
from ..engine.trajectory import Trajectory
from ..errors import DivergenceError, SpecError
from ..spec.checks import check_choice, check_int, finite_positive
from .kernels import transformer_ntk
from .model import BLOCKS, Transformer
from .network import forward, init_params
from .tasks import TokenTask
from .train import loss_and_gradient, scored, scored_rows


def _rows(task: TokenTask) -> np.ndarray:
    """The kernel's sequences: the training sequences, then the evaluation ones."""
    return np.concatenate([task.tokens, task.eval_tokens])


def transformer_initial_outputs(model: Transformer, task: TokenTask, width: int,
                                seed: int = 0) -> np.ndarray:
    """f_0 (B + E, S, V) of the network :func:`~.train.train_transformer` draws at
    ``width`` and ``seed``, on the training sequences and then the evaluation ones."""
    model.check_task(task)
    params = init_params(model, width, np.random.default_rng(check_seed(seed)))
    return forward(model, params, _rows(task)).f


def transformer_kernel_descent(model: Transformer, task: TokenTask, lr: float,
                               steps: int = 10, f0="zero", on_divergence: str = "raise",
                               divergence_bound: float | None = 1e10) -> Trajectory:
    """Kernel gradient descent of the module docstring at rate ``lr`` for ``steps`` steps,
    from ``f0``: "zero" or an array (B + E, S, V) such as
    :func:`transformer_initial_outputs`.  Returns the Trajectory
    :func:`~.train.train_transformer` returns.  An output that is not finite or beyond
    ``divergence_bound`` is a divergence: raised, naming the step, or with
    ``on_divergence='stop'`` the steps before it are returned."""
    model.check_task(task)
    lr, steps = finite_positive(lr, "lr"), check_int(steps, "steps", 0)
    check_choice(on_divergence, "on_divergence", ("raise", "stop"))
    if divergence_bound is not None:
        divergence_bound = finite_positive(divergence_bound, "divergence_bound")
    tokens = _rows(task)
    shape = tokens.shape + (model.vocab,)
    if isinstance(f0, str) and f0 == "zero":
        f = np.zeros(shape)
    else:
        try:
            f = np.array(f0, dtype=float)
        except (TypeError, ValueError):
            raise SpecError(f"f0 = {f0!r}; use 'zero' or an array {shape}") from None
        if f.shape != shape or not np.all(np.isfinite(f)):
            raise SpecError(f"f0 must be a finite array of shape {shape} (training then "
                            f"evaluation sequences); got shape {f.shape}")
    B = len(task.tokens)
    K = transformer_ntk(model, tokens)[:, :task.tokens.size]
    f_eval, f_train, losses, eval_loss = [], [], [], []
    status = None

    def evaluate():
        f_eval.append(scored(model, f[B:], task.eval_targets)[0])
        eval_loss.append(loss_and_gradient(model, f[B:], task.eval_targets)[0])

    evaluate()
    with np.errstate(over="ignore", invalid="ignore"):      # a divergence is reported
        for t in range(1, steps + 1):
            loss, chi = loss_and_gradient(model, f[:B], task.targets)
            f_train.append(scored(model, f[:B], task.targets)[0])
            losses.append(loss)
            f = f - lr * (K @ chi.reshape(-1, model.vocab)).reshape(shape)
            size = float(np.max(np.abs(f)))
            if not np.isfinite(size) or (divergence_bound is not None
                                         and size > divergence_bound):
                error = DivergenceError(t, None, "output f", BLOCKS, size=size,
                                        bound=divergence_bound)
                if on_divergence == "raise":
                    raise error
                status = RunStatus(t - 1, divergence=Divergence.of(error))
                break
            evaluate()
    T = len(f_eval) - 1
    V = model.vocab
    return Trajectory(
        f_eval=np.asarray(f_eval),
        f_train=np.asarray(f_train[:T]).reshape(T, scored_rows(model, task.tokens), V),
        loss=np.asarray(losses[:T]), stats={"eval_loss": np.asarray(eval_loss)},
        meta={"engine": "transformer kernel descent", "lr": lr},
        status=status or RunStatus(T))
