"""The transformer's coordinate check: the attention logits measured across widths against
:func:`~.exponents.classify_attention` (docs/theory.md §17.3).

At each width and seed a network is trained for a few full-batch steps; the logits ℓ_t of
every block on the training sequences (the entries the causal mask keeps) are recorded
before step t + 1.  ``sizes['logits']`` is their root-mean-square at t = 0..steps,
``sizes['dlogits']`` that of ℓ_t − ℓ_{t−1} at t = 1..steps, and ``sizes['df']`` that of the
output's change.  Slopes of log size against log n come with a 95 % interval from the
seeds' own slopes (t with seeds − 1 degrees of freedom, :func:`~tp_limits.analysis.fits.
width_exponent`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analysis.fits import width_exponent
from ..engine.options import check_seed
from ..engine.progress import progress_bar
from ..spec.checks import check_int, check_sequence, finite_positive
from ..spec.optimizers.sgd import SGD
from .exponents import classify_attention
from .model import Transformer
from .network import backward, forward, init_params
from .tasks import TokenTask
from .train import Stepper, loss_and_gradient


@dataclass(frozen=True)
class AttentionCoordCheck:
    """``sizes[q]`` (widths, times, seeds) for q in logits, dlogits, df; ``classification``:
    the exponents the sizes are checked against."""

    widths: tuple
    sizes: dict
    classification: object

    def slope(self, q: str, t: int) -> tuple:
        """(slope, 95 % half-width) of quantity ``q`` at time ``t`` (logits: t = 0..steps;
        the changes: t = 1..steps), over the seeds (seeds − 1 degrees of freedom)."""
        index = t if q == "logits" else t - 1
        return width_exponent(self.widths, self.sizes[q][:, index, :])

    def step_one_error(self) -> float:
        """The measured first-step slope of the logits' change minus the predicted one."""
        return self.slope("dlogits", 1)[0] - float(self.classification.step_one)


def attention_coord_check(model: Transformer, task: TokenTask, widths, lr: float,
                          optimizer=None, steps: int = 2, seeds: int = 3, seed: int = 0,
                          progress: bool = False) -> AttentionCoordCheck:
    """Measure the sizes of the module docstring at ``widths`` (rates η n^{−c} with
    η = ``lr``, :mod:`.parametrization`)."""
    optimizer = SGD() if optimizer is None else optimizer
    cls = classify_attention(model, optimizer)
    widths = tuple(check_int(n, "widths") for n in check_sequence(widths, "widths",
                                                                  "positive integers"))
    for n in widths:
        model.head_width(n)
    steps, seeds, lr = check_int(steps, "steps"), check_int(seeds, "seeds"), finite_positive(
        lr, "lr")
    seed = check_seed(seed)
    S = task.tokens.shape[1]
    kept = np.tril(np.ones((S, S), bool)) if model.causal else np.ones((S, S), bool)
    sizes = {"logits": np.zeros((len(widths), steps + 1, seeds)),
             "dlogits": np.zeros((len(widths), steps, seeds)),
             "df": np.zeros((len(widths), steps, seeds))}

    def rms(x):
        return float(np.sqrt(np.mean(x * x)))

    with progress_bar(progress, len(widths) * seeds, "attention coord check") as on_step:
        for i, n in enumerate(widths):
            for s in range(seeds):
                params = init_params(model, n, np.random.default_rng([seed, s, n]))
                stepper = Stepper(model, optimizer, lr, n, params)
                seen = []
                for t in range(steps + 1):
                    fw = forward(model, params, task.tokens)
                    seen.append((np.stack([ell[..., kept] for ell in fw.logits]), fw.f))
                    if t < steps:
                        _, df = loss_and_gradient(model, fw.f, task.targets)
                        stepper.step(params, backward(model, params, fw, df), t + 1)
                for t, (ell, f) in enumerate(seen):
                    sizes["logits"][i, t, s] = rms(ell)
                    if t:
                        sizes["dlogits"][i, t - 1, s] = rms(ell - seen[t - 1][0])
                        sizes["df"][i, t - 1, s] = rms(f - seen[t - 1][1])
                on_step(s)
    return AttentionCoordCheck(widths, sizes, cls)
