"""How an optimizer's update scales with width: the one input of the classifier that
depends on the optimizer (docs/theory.md §1.1, §1.7).

A parametrization names its optimizer (``tp.ABC(..., optimizer="adam")``); the
exponents of §1 read that optimizer's :class:`UpdateRule`:

* ``a_factor`` k: the W-space step of layer l is n^{−(k a_l + c_l)} per unit of
  the update's entries (SGD: W = n^{−a} w and ∇_w = n^{−a}∇_W give k = 2; an
  entrywise-normalized update such as Adam's carries one n^{−a}: k = 1);
* ``normalized``: the update's entries do not depend on the gradient's size
  (Adam, Muon), so they do not carry the backward signal n^{−m};
* ``entry_exponents`` (e_in, e_hidden, e_out): a normalized update's entries are
  Θ(n^{−e}) for the input layer, the hidden layers and the readout: 0 for Adam
  (entrywise Θ(1)); for Muon, whose update msign(D) has spectral norm 1, an
  update of a matrix with j width-n sides has entries n^{−j/2}: (½, 1, ½)
  (docs/theory.md §11);

so that

    q   = k a_{L+1} + c_{L+1} + e_out,
    r_l = (0 if normalized else m) + k a_l + c_l − 1 + [l = 1] + e_l,

the symmetry (a + θ, b − θ, c − kθ) leaves training unchanged, and μP's a = 0
form has, for SGD, c = (−1, 0, …, 0, 1) and, for a normalized rule,
c = (−e_in, 1 − e_hidden, …, 1 − e_out).  A new optimizer names the rule it follows
(``Optimizer.exponents``), and registers a new one here only if its updates scale
differently.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..errors import InvalidParametrizationError


@dataclass(frozen=True)
class UpdateRule:
    name: str
    a_factor: int
    normalized: bool
    #: a normalized update has an ε whose width exponents the classifier reports (§10.3)
    has_eps: bool = False
    #: extra exponent of the update's entries: input layer, hidden layers, readout
    entry_exponents: tuple = (0, 0, 0)

    def entry_exponent(self, l: int, L: int):
        """e_l of layer l (0-based: 0 the input layer, L the readout)."""
        e_in, e_hidden, e_out = self.entry_exponents
        return e_in if l == 0 else e_out if l == L else e_hidden

    @property
    def label(self) -> str:
        """Superscript of r and q in reports (TP IVb writes r^A for Adam)."""
        return "^A" if self.normalized else ""

    def q_formula(self, c: str = "c_{L+1}") -> str:
        k = "" if self.a_factor == 1 else str(self.a_factor)
        return f"{k}a_{{L+1}} + {c}"

    def mup_c(self, L: int) -> list:
        """c of μP's a = 0 form, b = (0, ½, …, ½, 1): every r_l = 0 and q = 1 (m = 1)."""
        if not self.normalized:
            return [-1] + [0] * (L - 1) + [1]
        e_in, e_hidden, e_out = self.entry_exponents
        return [-e_in] + [1 - e_hidden] * (L - 1) + [1 - e_out]

    def spectral_lr(self, n_in: int, n_out: int) -> float:
        """The learning-rate factor of the spectral parametrization (docs/theory.md §6) for a
        layer n_in -> n_out: a rank-one gradient step needs n_out/n_in, a normalized
        (sign-like) step 1/n_in, a step of spectral norm one √(n_out/n_in)."""
        if self.spectral:
            return (n_out / n_in) ** 0.5
        return 1.0 / n_in if self.normalized else n_out / n_in

    @property
    def spectral(self) -> bool:
        """The update is normalized in spectral norm (every width-n side shrinks it)."""
        return self.normalized and tuple(self.entry_exponents) == (HALF, 1, HALF)


HALF = Fraction(1, 2)

UPDATE_RULES = {
    "sgd": UpdateRule("sgd", a_factor=2, normalized=False),
    "adam": UpdateRule("adam", a_factor=1, normalized=True, has_eps=True),
    # msign(D): spectral norm one, entries n^{-1/2} per width-n side
    "muon": UpdateRule("muon", a_factor=1, normalized=True, entry_exponents=(HALF, 1, HALF)),
    # Muon on the hidden matrices, Adam on the input layer and the readout
    "muon_adam": UpdateRule("muon_adam", a_factor=1, normalized=True, has_eps=True,
                            entry_exponents=(0, 1, 0)),
}


def update_rule(name) -> UpdateRule:
    """The rule called ``name``, or an InvalidParametrizationError listing the known ones."""
    try:
        return UPDATE_RULES[name]
    except (KeyError, TypeError):
        raise InvalidParametrizationError(
            f"unknown optimizer {name!r}; choose one of {tuple(UPDATE_RULES)}") from None
