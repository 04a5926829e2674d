"""The adapter's own hyperparameters, shared by every network an adapter is put on
(docs/theory.md §16.3, §16.6).

    W = W₀ + (α/r) B A,   A ∈ ℝ^{r×n} (entries N(0, σ_A²/n), or 0),  B ∈ ℝ^{n×r} (entries
    N(0, σ_B²), or 0),   η_A = η̄_A n^{−c_A},  η_B = η̄_B n^{−c_B},

W₀ frozen.  A network that carries an adapter (:class:`~.toy.LoRAToy`,
:class:`~.pretrained.PretrainedLoRA`) subclasses :class:`Adapter` and says what φ follows
the adapted layer (``phi``), how small its frozen readout is (``p``: W_out = ω n^{−p}) and
its input dimension (``d_in``); the exponents (c_A, c_B) are the classifier's maximal
stable rates for that readout (:func:`~.exponents.maximal_rates`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..engine.backend import numpy_backend
from ..errors import SpecError
from ..nonlinearities import get_nonlinearity
from ..spec.checks import check_choice, check_int, finite_non_negative, finite_positive
from ..spec.optimizers.adam import _betas
from .exponents import INITS, OPTIMIZERS, maximal_rates

_NP = numpy_backend()


@dataclass(frozen=True)
class Adapter:
    """Rank, multiplier α (None: α = r, so α/r = 1), initialization, optimizer and its
    hyperparameters of a low-rank adapter (module docstring)."""

    rank: int = 4
    alpha: float | None = None
    init: str = "zero_B"
    optimizer: str = "adam"
    sigma_A: float = 1.0
    sigma_B: float = 1.0
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8

    def _check_adapter(self) -> None:
        """The adapter's fields checked (and α defaulted), each under its own name."""
        object.__setattr__(self, "rank", check_int(self.rank, "rank"))
        alpha = float(self.rank) if self.alpha is None else self.alpha
        object.__setattr__(self, "alpha", finite_positive(alpha, "alpha"))
        check_choice(self.init, "init", INITS)
        check_choice(self.optimizer, "optimizer", OPTIMIZERS)
        for name in ("sigma_A", "sigma_B"):
            finite_positive(getattr(self, name), name)
        object.__setattr__(self, "betas", _betas(self.betas, "betas"))
        object.__setattr__(self, "eps", finite_non_negative(self.eps, "eps"))

    def _check_saddle(self) -> None:
        """A zero factor starts the adapter's output at 0; with φ′(0) = 0 nothing moves."""
        if self.init != "gaussian" and get_nonlinearity(self.phi).dphi(
                np.zeros(1), _NP)[0] == 0.0:
            raise SpecError(
                f"phi = {self.phi!r} with init = {self.init!r}: the adapter's output B A Z "
                f"starts at 0, where φ′(0) = 0, so neither factor ever gets a gradient (a "
                f"saddle); use init = 'gaussian' (LoRA+'s experiment) or a φ with φ′(0) ≠ 0")

    #: where the adapter sits (exponents.POSITIONS); a network may put it elsewhere
    position = "hidden"

    @property
    def scale(self) -> float:
        """α/r, the adapter's multiplier."""
        return self.alpha / self.rank

    @cached_property
    def exponents(self) -> tuple:
        """(c_A, c_B): the maximal stable rates' exponents (module docstring)."""
        cls = maximal_rates(self.optimizer, self.position, self.init, self.p)
        return cls.c_A, cls.c_B

    def rates(self, width: int, eta_A: float, eta_B: float) -> tuple:
        """(η_A, η_B) at width n of the width-free (η̄_A, η̄_B): η̄ n^{−c}."""
        c_A, c_B = self.exponents
        return eta_A * width ** -float(c_A), eta_B * width ** -float(c_B)

    def eps_scales(self, width: int) -> tuple:
        """Adam's ε for A and B at width n: ε times the size of each factor's gradient
        entries, n^{1−p} and n^{−p} inside the network (A's gradient sums B's n-wide
        fan-out; docs/theory.md §16.3), n^{−p} for both at the readout, so ε is width-free."""
        p = float(self.p)
        fan_out = 0.0 if self.position == "readout" else 1.0
        return self.eps * width ** (fan_out - p), self.eps * width ** -p
