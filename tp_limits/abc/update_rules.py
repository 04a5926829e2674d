"""How an optimizer's update scales with width: the one input of the classifier that
depends on the optimizer (docs/theory.md §1.1, §1.7).

A parametrization names its optimizer (``tp.ABC(..., optimizer="adam")``); the
exponents of §1 read that optimizer's :class:`UpdateRule`:

* ``a_factor`` k: the W-space step of layer l is n^{−(k a_l + c_l)} per unit of
  the update's entries (SGD: W = n^{−a} w and ∇_w = n^{−a}∇_W give k = 2; an
  entrywise-normalized update such as Adam's carries one n^{−a}: k = 1);
* ``normalized``: the update's entries are Θ(1) whatever the gradient's size
  (Adam), so they do not carry the backward signal n^{−m};

so that

    q   = k a_{L+1} + c_{L+1},
    r_l = (0 if normalized else m) + k a_l + c_l − 1 + [l = 1],

the symmetry (a + θ, b − θ, c − kθ) leaves training unchanged, and μP's a = 0
form has c_l = 1 − [l = 1] − (0 if normalized else 1), c_{L+1} = 1.  A new
optimizer names the rule it follows (``Optimizer.exponents``), and registers a
new one here only if its updates scale differently.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidParametrizationError


@dataclass(frozen=True)
class UpdateRule:
    name: str
    a_factor: int
    normalized: bool
    #: a normalized update has an ε whose width exponents the classifier reports (§10.3)
    has_eps: bool = False

    @property
    def label(self) -> str:
        """Superscript of r and q in reports (TP IVb writes r^A for Adam)."""
        return "^A" if self.normalized else ""

    def q_formula(self, c: str = "c_{L+1}") -> str:
        k = "" if self.a_factor == 1 else str(self.a_factor)
        return f"{k}a_{{L+1}} + {c}"

    def mup_c(self, L: int) -> list:
        """c of μP's a = 0 form, b = (0, ½, …, ½, 1): every r_l = 0 and q = 1 (m = 1)."""
        hidden = 1 if self.normalized else 0
        return [hidden - 1] + [hidden] * (L - 1) + [1]

    def spectral_lr(self, n_in: int, n_out: int) -> float:
        """The learning-rate factor of the spectral parametrization (docs/theory.md §6) for a
        layer n_in -> n_out: a rank-one gradient step needs n_out/n_in, a normalized
        (sign-like) step 1/n_in."""
        return 1.0 / n_in if self.normalized else n_out / n_in


UPDATE_RULES = {
    "sgd": UpdateRule("sgd", a_factor=2, normalized=False),
    "adam": UpdateRule("adam", a_factor=1, normalized=True, has_eps=True),
}


def register_update_rule(rule: UpdateRule) -> UpdateRule:
    """Add the width rule of a new optimizer (once, under its name)."""
    if rule.name in UPDATE_RULES and UPDATE_RULES[rule.name] != rule:
        raise ValueError(f"an update rule called {rule.name!r} is already registered")
    UPDATE_RULES[rule.name] = rule
    return rule


def update_rule(name) -> UpdateRule:
    """The rule called ``name``, or an InvalidParametrizationError listing the known ones."""
    try:
        return UPDATE_RULES[name]
    except (KeyError, TypeError):
        raise InvalidParametrizationError(
            f"unknown optimizer {name!r}; choose one of {tuple(UPDATE_RULES)}") from None
