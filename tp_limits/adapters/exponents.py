"""Width exponents of a low-rank adapter W = W₀ + (α/r) B A, exact (docs/theory.md §16.2).

Every quantity of the fine-tuning dynamics is Θ(n^γ) for an exponent γ (−∞ for an exact
zero).  With the learning rates η_A = η̄_A n^{−c_A}, η_B = η̄_B n^{−c_B}, the adapter's
input Z (entries Θ(1)), its backward vector dZ̄ at the output (entries n^{−p}: p = 1 in a
μP network, 0 when the adapter is the readout) and the rank r fixed, one step moves

    SGD:   ΔB   = −c_B + γ[dZ̄] + γ[Z_A]                   (∂B = dZ̄ ⊗ Z_A)
           ΔZ_A = −c_A + γ[Bᵀ dZ̄] + [fan-in is n]          (∂A = Bᵀ dZ̄ ⊗ Z, ΔA Z = ∂A·|Z|²)
    Adam:  ΔB   = −c_B,   ΔZ_A = −c_A + [fan-in is n]      (entries of ψ are Θ(1))

where γ[Bᵀ dZ̄] sums over the fan-out: a CLT sum ½ + γ[B₀] of the initial B (independent
of dZ̄) and a coherent sum 1 + γ[ΔB] of its correlated updates when the fan-out is n, the
plain max(γ[B₀], γ[ΔB]) when it is finite (the readout).  The adapter's output
Z_B = B A Z then changes by

    δ¹ = γ[B] + ΔZ_A,   δ² = ΔB + γ[Z_A],   δ³ = ΔB + ΔZ_A,   ΔZ_B = max(δ¹, δ², δ³),

and the output f by Δf = ΔZ_B + 1 − p through a width-n readout n^{−p} (coherently), by
ΔZ_B when the adapter is the readout.  Iterating from the initialization (B₀ = 0 with
Z_A⁰ = Θ(1) by the CLT, or A₀ = 0, or both Gaussian) gives LoRA+'s definitions:

* *stable*: Z_A, Z_B and f stay O(1) at every step;
* *efficient*: stable, and δ¹ = δ² = Θ(1) at every step t ≥ 2 (both factors move the
  feature);

the steps are iterated until none of the sizes changes (a fixed point: every later step
repeats the last);
* the maximal stable rates: the smallest (c_A, c_B) that keep it stable.

:func:`classify_adapter` returns the exponents and the verdicts with their reasons;
:func:`maximal_rates` and :func:`best_shared_rate` solve for the exponents over a grid of
rationals (every exponent here is a multiple of ½).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..errors import SpecError
from ..spec.checks import check_choice

NEG = float("-inf")
#: where the adapter sits: its fan-in and fan-out are n, or one of them is finite
POSITIONS = ("hidden", "input", "readout")
#: the adapters' initializations: B₀ = 0 (A Gaussian, std σ_A n^{−1/2}), A₀ = 0 (B Gaussian
#: Θ(1)), or both Gaussian
INITS = ("zero_B", "zero_A", "gaussian")
OPTIMIZERS = ("sgd", "adam")
#: steps iterated at least, and at most: the sizes only grow (each is a max over the steps),
#: so the iteration stops at the first step that changes none of them — their fixed point
STEPS, MAX_STEPS = 3, 64
#: the rationals searched for rate exponents: multiples of ½ in [−3, 3]
GRID = tuple(Fraction(k, 2) for k in range(-6, 7))


def _frac(x):
    return x if x == NEG else Fraction(x)


def _max(*xs):
    return max(xs)


def _add(*xs):
    return NEG if any(x == NEG for x in xs) else sum(xs, Fraction(0))


def _show(x) -> str:
    if x == NEG:
        return "0 (exactly)"
    return f"n^{x}" if x.denominator == 1 else f"n^({x})"


@dataclass(frozen=True)
class Step:
    """The exponents γ of one step t (1-based): the updates ΔB, ΔZ_A, the feature update
    terms δ¹, δ², δ³, ΔZ_B, the output's Δf, and the sizes B, Z_A, Z_B after it."""

    t: int
    dB: object
    dZA: object
    delta1: object
    delta2: object
    delta3: object
    dZB: object
    df: object
    B: object
    ZA: object
    ZB: object


@dataclass(frozen=True)
class AdapterClass:
    """The exponents of an adapter's fine-tuning and the verdicts they give."""

    optimizer: str
    position: str
    init: str
    p: Fraction
    c_A: Fraction
    c_B: Fraction
    steps: tuple

    @property
    def stable(self) -> bool:
        return all(s.ZA <= 0 and s.ZB <= 0 and s.df <= 0 for s in self.steps)

    @property
    def efficient(self) -> bool:
        return self.stable and all(s.delta1 == 0 and s.delta2 == 0 for s in self.steps[1:])

    @property
    def feature_exponent(self):
        """γ[ΔZ_B] at the fixed point (0: the adapter learns features; < 0: they vanish)."""
        return self.steps[-1].dZB

    @property
    def ratio_exponent(self) -> Fraction:
        """η_B/η_A = Θ(n^{c_A − c_B})."""
        return self.c_A - self.c_B

    def reasons(self) -> list:
        """Why the adapter is not efficient (empty: it is)."""
        out = []
        for s in self.steps:
            for name, x in (("Z_A = A Z", s.ZA), ("Z_B = B A Z", s.ZB), ("Δf", s.df)):
                if x > 0:
                    out.append(f"{name} blows up like {_show(x)} at step {s.t}")
        if out:
            return out[:3]
        last = self.steps[-1]
        if last.dZB < 0:
            out.append(f"the adapter's feature update vanishes like {_show(last.dZB)}")
        for name, x, who in (("δ¹ = B ΔZ_A", last.delta1, "A"),
                             ("δ² = ΔB Z_A", last.delta2, "B")):
            if x < 0:
                out.append(f"{name} is {_show(x)}: {who}'s updates do not move the feature")
        return out

    def verdict(self) -> str:
        head = (f"adapter ({self.position}, init {self.init}, {self.optimizer}, "
                f"η_A ∝ {_show(-self.c_A)}, η_B ∝ {_show(-self.c_B)}): ")
        if self.efficient:
            return head + "stable and efficient (δ¹ = δ² = Θ(1))"
        return head + "; ".join(self.reasons())


def classify_adapter(optimizer: str = "adam", c_A=1, c_B=0, position: str = "hidden",
                     init: str = "zero_B", p=1) -> AdapterClass:
    """The exponents of fine-tuning one adapter (module docstring): ``optimizer`` 'sgd' or
    'adam', rate exponents ``c_A``, ``c_B`` (η = η̄ n^{−c}), ``position`` 'hidden', 'input'
    or 'readout', ``init`` 'zero_B', 'zero_A' or 'gaussian', and ``p`` the size n^{−p} of
    the backward vector's entries at the adapter's output (1 in a μP network; the readout
    position ignores it)."""
    optimizer = check_choice(optimizer, "optimizer", OPTIMIZERS)
    position = check_choice(position, "position", POSITIONS)
    init = check_choice(init, "init", INITS)
    try:
        c_A, c_B, p = Fraction(c_A), Fraction(c_B), Fraction(p)
    except (TypeError, ValueError):
        raise SpecError(f"c_A = {c_A!r}, c_B = {c_B!r} and p = {p!r} must be rational "
                        "numbers (e.g. 1, 0, '1/2')") from None
    fan_in_n, fan_out_n = position != "input", position != "readout"
    dZ = -p if fan_out_n else Fraction(0)
    B0 = NEG if init == "zero_B" else Fraction(0)
    ZA = NEG if init == "zero_A" else Fraction(0)
    B, dB_all = B0, NEG
    steps = []
    for t in range(1, MAX_STEPS + 1):
        before = (B, dB_all, ZA)
        gradB = _add(dZ, ZA)
        if fan_out_n:
            BtdZ = _add(dZ, _max(_add(Fraction(1, 2), B0), _add(Fraction(1), dB_all)))
        else:
            BtdZ = _add(dZ, B)
        gain = Fraction(1) if fan_in_n else Fraction(0)
        if optimizer == "sgd":
            dB = _add(-c_B, gradB)
            dZA = _add(-c_A, BtdZ, gain)
        else:
            dB = NEG if gradB == NEG else -c_B
            dZA = NEG if BtdZ == NEG else -c_A + gain
        d1, d2, d3 = _add(B, dZA), _add(dB, ZA), _add(dB, dZA)
        dZB = _max(d1, d2, d3)
        df = _add(dZB, Fraction(1) - p) if fan_out_n else dZB
        B, dB_all, ZA = _max(B, dB), _max(dB_all, dB), _max(ZA, dZA)
        steps.append(Step(t, dB, dZA, d1, d2, d3, dZB, df, B, ZA, _add(B, ZA)))
        if t >= STEPS and (B, dB_all, ZA) == before:
            break
    return AdapterClass(optimizer, position, init, p, c_A, c_B, tuple(steps))


def _score(cls):
    last = cls.steps[-1]
    return (min(last.delta1, last.delta2), last.dZB)


def maximal_rates(optimizer: str = "adam", position: str = "hidden", init: str = "zero_B",
                  p=1) -> AdapterClass:
    """The rates that move the feature most while stable: on :data:`GRID`, the stable
    (c_A, c_B) with the largest min(δ¹, δ²) (0: efficient), then the largest ΔZ_B, then the
    largest rates (smallest c_A + c_B)."""
    stable = [classify_adapter(optimizer, c_A, c_B, position, init, p)
              for c_A in GRID for c_B in GRID]
    stable = [s for s in stable if s.stable and s.feature_exponent > NEG]
    if not stable:
        raise SpecError(f"no stable rates on the grid for {optimizer}, {position}, {init}")
    return max(stable, key=lambda s: (_score(s), -(s.c_A + s.c_B), -s.c_A))


def best_shared_rate(optimizer: str = "adam", position: str = "hidden",
                     init: str = "zero_B", p=1) -> AdapterClass:
    """η_A = η_B = η̄ n^{−c}: the stable c whose feature update (then δ¹, δ²) is largest."""
    stable = [classify_adapter(optimizer, c, c, position, init, p) for c in GRID]
    stable = [s for s in stable if s.stable and s.feature_exponent > NEG]
    return max(stable, key=lambda s: (s.feature_exponent, _score(s), -s.c_A))
