"""Classification in depth: what a residual network's branch exponent α and rate exponent γ
do as the number of blocks K grows, for an update rule that carries the branch multiplier
p times (docs/theory.md §12.6).

Power counting, exactly (Fractions), with c = K^{−α}:

* at initialization the K branches add independent parts of size K^{−α}: together
  Θ(K^{½−α}); α < ½ makes the forward pass grow without bound (like exp(K^{1−2α}));
* one step moves each block by Θ(K^{−(pα+γ)}) and the K blocks together, coherently, by
  Θ(K^{1−pα−γ}).

Hence the classes:

=====================  ===========================  ==========================================
class                  condition                    meaning
=====================  ===========================  ==========================================
unstable at init       α < ½                        the forward pass blows up with depth
unstable in training   α >= ½, pα + γ < 1           the blocks' summed update blows up
trivial in depth       α >= ½, pα + γ > 1           the blocks' summed update vanishes: only
                                                    the input layer and the readout learn
Depth-μP               α = ½, pα + γ = 1            stable, the blocks' summed update Θ(1),
                                                    their initial parts Θ(1) (feature
                                                    diversity)
CompleteP              α = 1, pα + γ = 1,           blocks of two layers: stable and maximal,
                       blocks of two                each branch starting at Θ(1/K)
unfaithful             α > 1, pα + γ = 1,           blocks of two layers: each matrix's
                       blocks of two                update grows like K^{α−1}, so the inner
                                                    pre-activation W_a φ(h), the input of the
                                                    block's nonlinearity, blows up in training
redundant              α > ½, pα + γ = 1            stable and maximal, but the branches'
                       (otherwise)                  initial parts vanish, Θ(K^{½−α})
=====================  ===========================  ==========================================

For blocks of one these are the published infinite-depth classes (docs/theory.md §12.6
states them and the translation: the published rate exponent is that of the update,
γ + (p − 1)α here), with one difference of architecture: the published blocks put the
nonlinearity after the matrix, φ(W x), so there α > 1 on the maximal line is unfaithful
with blocks of one too; this package's blocks of one, W φ(h), feed no nonlinearity with
W's output, and stay redundant there.  CompleteP and the unfaithful blocks of two are not
in the published regions (it finds every choice for blocks of two defective).

The width classification (§1) is unchanged at every K; this is the depth half.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..errors import SpecError

#: how many times an update rule's step carries the branch multiplier (SGD: in the
#: gradient and in the product; a normalized step, Adam or Muon, only in the product)
BRANCH_POWERS = {"sgd": 2, "adam": 1, "muon": 1, "muon_adam": 1}

DEPTH_CLASSES = ("unstable at init", "unstable in training", "trivial in depth", "Depth-μP",
                 "CompleteP", "unfaithful", "redundant")


def _exact(x, name: str) -> Fraction:
    try:
        return Fraction(x).limit_denominator(10 ** 6)
    except (TypeError, ValueError):
        raise SpecError(f"{name} = {x!r} must be a finite number") from None


@dataclass(frozen=True)
class DepthClassification:
    """The depth class of (α, γ) for an update rule, with the exponents in K of the first
    step's block update, the blocks' summed update and the branches' initial part."""

    alpha: Fraction
    gamma: Fraction
    optimizer: str
    block_depth: int
    verdict: str
    reason: str

    @property
    def p(self) -> int:
        return BRANCH_POWERS[self.optimizer]

    @property
    def block_update(self) -> Fraction:
        """Exponent in K of one block's move in one step: −(pα + γ)."""
        return -(self.p * self.alpha + self.gamma)

    @property
    def summed_update(self) -> Fraction:
        """Exponent in K of the K blocks' move together: 1 − pα − γ."""
        return 1 + self.block_update

    @property
    def initial_branches(self) -> Fraction:
        """Exponent in K of the branches' summed part at initialization: ½ − α."""
        return Fraction(1, 2) - self.alpha

    @property
    def stable(self) -> bool:
        return self.initial_branches <= 0 and self.summed_update <= 0

    @property
    def maximal(self) -> bool:
        """The blocks' summed update is Θ(1): they learn at every depth."""
        return self.stable and self.summed_update == 0


def classify_depth(alpha, gamma, optimizer: str = "sgd", block_depth: int = 1
                   ) -> DepthClassification:
    """The depth class of branch exponent ``alpha`` and rate exponent ``gamma`` under the
    update rule ``optimizer`` ('sgd', 'adam', 'muon', 'muon_adam'), blocks of
    ``block_depth`` layers (docs/theory.md §12.6)."""
    if optimizer not in BRANCH_POWERS:
        raise SpecError(f"optimizer = {optimizer!r}; choose one of {tuple(BRANCH_POWERS)}")
    if block_depth not in (1, 2):
        raise SpecError(f"block_depth = {block_depth!r} must be 1 or 2")
    a, g = _exact(alpha, "alpha"), _exact(gamma, "gamma")
    p = BRANCH_POWERS[optimizer]
    summed = 1 - p * a - g
    half = Fraction(1, 2)
    if a < half:
        verdict = "unstable at init"
        reason = (f"α = {a} < ½: the K branches add independent parts of size K^(−α), "
                  f"together K^({half - a}); the forward pass grows without bound in depth")
    elif summed > 0:
        verdict = "unstable in training"
        reason = (f"pα + γ = {p * a + g} < 1 (p = {p}): each block moves by K^({-(p * a + g)}), "
                  f"the K blocks together by K^({summed}), which grows with depth")
    elif summed < 0:
        verdict = "trivial in depth"
        reason = (f"pα + γ = {p * a + g} > 1 (p = {p}): the K blocks together move by "
                  f"K^({summed}) → 0; only the input layer and the readout learn")
    elif a == half:
        verdict = "Depth-μP"
        reason = ("α = ½ and pα + γ = 1: stable, the blocks' summed update Θ(1) and their "
                  "initial parts Θ(1) as K grows")
    elif a == 1 and block_depth == 2:
        verdict = "CompleteP"
        reason = ("α = 1 and pα + γ = 1 on blocks of two layers: stable and maximal, each "
                  "branch starting at Θ(1/K)")
    elif a > 1 and block_depth == 2:
        verdict = "unfaithful"
        reason = (f"α = {a} > 1 and pα + γ = 1 on blocks of two layers: each matrix's update "
                  f"grows like K^({a - 1}) against its initialization, so the inner "
                  "pre-activation W_a φ(h), the input of the block's nonlinearity, blows up "
                  "in training")
    else:
        verdict = "redundant"
        reason = (f"α = {a} > ½ and pα + γ = 1: stable and maximal, but the branches' "
                  f"initial parts vanish like K^({half - a})")
    return DepthClassification(a, g, optimizer, block_depth, verdict, reason)


def depth_grid(optimizer: str = "sgd", block_depth: int = 1, alphas=None, gammas=None) -> dict:
    """{(α, γ): verdict} on a grid (default: 21 × 21, α = 0…2 and γ = −1…1, steps of 1/10:
    every preset of spec/residual.py lies on it)."""
    alphas = [Fraction(i, 10) for i in range(21)] if alphas is None else alphas
    gammas = [Fraction(i - 10, 10) for i in range(21)] if gammas is None else gammas
    return {(a, g): classify_depth(a, g, optimizer, block_depth).verdict
            for a in alphas for g in gammas}
