"""The spectral condition's update rules: any optimizer's direction Φ through a spectral
transform T, scaled to the spectral norm the condition asks (docs/theory.md §11.7).

Per layer l, with Φ_l the base optimizer's direction and s the step's schedule factor,

    W^l ← (1 − s δ_l) W^l − s η_l n^{−(a_l + c_l)} κ_l T(Φ_l),

κ_l and the exponents as for Muon (§11.1–§11.2): T(Φ) has spectral norm one whatever
Φ's size, so every transform follows the 'muon' width rule (or 'muon_adam' with Adam
on the vector layers).  T is msign (U Vᵀ), 'sn' (Φ/‖Φ‖₂) or 'svc' (U min(λΣ/σ_max, 1)
Vᵀ): transforms.py.

* **SGD base** (with or without momentum, heavy ball or Nesterov): Φ is the momentum
  buffer, a sum of the gradients' outer products, so the finite network keeps its
  factors and applies T through k × k cores, and every limit engine follows it as it
  follows Muon (muon.py's :class:`~.muon.BufferSpectral`).  ``SpectralUpdate(SGD(
  momentum=β, nesterov=True), "msign")`` is Muon(momentum=β) — the same code.
* **Adam base**: Φ = m̂/(√v̂ + ε) entry by entry, a nonlinear function of the gradients'
  factors and not of low rank, so the finite network forms it densely (Adam's two
  moments per weight, and T by a thin SVD of ψ, or Newton–Schulz: O(n³) per hidden
  matrix and step).  Its limit is not built: :meth:`SpectralUpdate.limit_refusal` says why.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import SpecError
from ..checks import check_choice, finite_non_negative
from .adam import Adam, _betas
from .base import Optimizer, _fmt, decay_field, hyperparameter
from .muon import BufferSpectral, BufferUpdate, _ns_steps, move_rows, spectral_step
from .sgd import SGD
from .transforms import TRANSFORMS, transform_of

#: SpectralUpdate's vector_layers: the transform on every layer, or Adam on the input
#: layer and the readout
SPECTRAL_VECTOR_LAYERS = ("spectral", "adam")


def _base(value, name):
    if type(value) not in (SGD, Adam):
        shown = str(value) if isinstance(value, Optimizer) else repr(value)
        raise SpecError(f"{name} = {shown} must be tp.SGD(...) or tp.Adam(...): the "
                        "coordinatewise optimizer whose direction the transform acts on")
    if value.weight_decay:
        raise SpecError(f"{name} = {value} has weight_decay={value.weight_decay:g}: put the "
                        "decay on the spectral update, SpectralUpdate(..., weight_decay="
                        f"{value.weight_decay:g}), where it is decoupled (W ← (1 − η_l λ) W); "
                        "inside the base it would enter Φ and be normalized away")
    return value


def _transform(value, name):
    return check_choice(value, name, TRANSFORMS)


def _clip(value, name):
    if value is None:
        return None
    lam = finite_non_negative(value, name)
    if lam < 1.0:
        raise SpecError(f"{name} = {value!r} must be >= 1 (the threshold σ_max/λ: λ = 1 is "
                        "spectral normalization, λ → ∞ is msign)")
    return lam


def _spectral_vectors(v, name):
    return check_choice(v, name, SPECTRAL_VECTOR_LAYERS)


@dataclass(frozen=True)
class SpectralUpdate(BufferSpectral):
    """``base``'s direction through the spectral transform ``transform``, scaled by
    √(fan_out/fan_in) (docs/theory.md §11.7).

    ``base``: tp.SGD(...) (Φ the momentum buffer; a limit in every engine) or
    tp.Adam(...) (Φ Adam's update; finite networks, and the limit with one hidden
    layer), without weight decay of its own; ``transform``: 'msign' (U Vᵀ; ``ns_steps``
    Newton–Schulz iterations or None for the exact polar factor), 'sn' (Φ/‖Φ‖₂) or 'svc'
    (U min(λ Σ/σ_max, 1) Vᵀ with λ = ``clip`` ≥ 1); ``weight_decay`` λ: decoupled,
    W ← (1 − η_l λ) W per step; ``vector_layers``: 'spectral' (the transform on every
    layer) or 'adam' (Adam with ``adam_betas`` and ``adam_eps`` on the input layer and
    the readout).
    """

    base: Optimizer = field(default=SGD(momentum=0.95, nesterov=True),
                            metadata={"check": _base})
    transform: str = field(default="msign", metadata={"check": _transform})
    clip: float | None = field(default=None, metadata={"check": _clip})
    ns_steps: int | None = hyperparameter(5, _ns_steps, "Newton–Schulz iterations of msign "
                                          "(None or 'exact': the exact polar factor)",
                                          kind="int|str")
    weight_decay: float = decay_field()
    vector_layers: str = hyperparameter("spectral", _spectral_vectors,
                                        "'spectral' on every layer, or 'adam' on the input "
                                        "layer and the readout", kind="str")
    adam_betas: tuple = hyperparameter((0.9, 0.999), _betas, "Adam's (β₁, β₂) of the vector "
                                       "layers", kind="numbers")
    adam_eps: float = hyperparameter(1e-8, finite_non_negative,
                                     "Adam's ε of the vector layers (docs/theory.md §10.3)")

    name = "spectral"

    def __post_init__(self):
        super().__post_init__()
        if self.transform == "svc" and self.clip is None:
            raise SpecError("clip is required with transform = 'svc': λ >= 1, the threshold "
                            "σ_max/λ above which singular values are set to one (λ = 1 is "
                            "'sn', λ → ∞ is 'msign')")
        if self.transform != "svc" and self.clip is not None:
            raise SpecError(f"clip = {self.clip!r} with transform = {self.transform!r}: the "
                            "threshold λ belongs to transform='svc' alone (give it there, "
                            "and only there)")
        if self.transform != "msign" and self.ns_steps != 5:
            raise SpecError(f"ns_steps = {self.ns_steps!r} does not apply to transform = "
                            f"{self.transform!r}, which is computed exactly; it is msign's")

    # -- what the base makes of the buffer ---------------------------------------------------
    @property
    def low_rank(self) -> bool:
        """Φ is the buffer of a linear base (SGD): a sum of outer products."""
        return self.base.linear

    @property
    def momentum(self) -> float:
        return self.base.momentum if self.low_rank else 0.0

    @property
    def nesterov(self) -> bool:
        return bool(getattr(self.base, "nesterov", False))

    @property
    def spectral(self):
        return transform_of(self.transform, self.clip, self.ns_steps)

    @property
    def own(self):
        """The update of a matrix moved by the transform: from the buffer's factors (SGD
        base) or from the dense Adam direction."""
        return BufferUpdate(self) if self.low_rank else DenseUpdate(self)

    @property
    def vectors(self):
        return self.adam if self.vector_layers == "adam" else self.own

    def layer_optimizer(self, l: int, layers: int):
        return self.vectors if l in (0, layers - 1) else self.own

    @property
    def pair_matrix(self) -> bool:
        return self.low_rank

    @property
    def dense_transform(self) -> bool:
        return not self.low_rank

    @property
    def partners(self) -> bool:
        # partner particles follow an entrywise rule; T(ψ) of a hidden matrix is not one
        # (its limit is refused, limit_refusal), and the vector layers move by their rows
        return False

    @property
    def exact_linear(self) -> bool:
        return self.low_rank and self.vectors.exact_linear

    def limit_refusal(self, net) -> str | None:
        if self.low_rank or net.L == 1:
            return None
        return (f"{self} with hidden n × n matrices (L = {net.L}): with an Adam base the "
                "direction Φ = m̂/(√v̂ + ε) of a hidden matrix is an entrywise nonlinear "
                "function of the gradients' factors, not of low rank, and "
                f"{self.spectral} of it is a function of the whole spectrum of that n × n "
                "matrix; that infinite-width limit is not built (docs/theory.md §11.7). "
                "Finite networks train with it (tp.train_finite); L = 1 and an SGD base "
                "have a limit")

    def __str__(self):
        """``SpectralUpdate(SGD(momentum=0.9, weight_decay=0, nesterov=True), 'sn')``: the
        base, the transform, and every other setting away from its default."""
        parts = [str(self.base), repr(self.transform)]
        if self.clip is not None:
            parts.append(f"clip={_fmt(self.clip)}")
        for name, default in (("ns_steps", 5), ("weight_decay", 0.0),
                              ("vector_layers", "spectral")):
            if getattr(self, name) != default:
                parts.append(f"{name}={_fmt(getattr(self, name))}")
        if self.vector_layers == "adam":
            parts += [f"adam_betas={_fmt(self.adam_betas)}", f"adam_eps={_fmt(self.adam_eps)}"]
        return f"SpectralUpdate({', '.join(parts)})"


class DenseUpdate:
    """The transform of Adam's dense direction on one layer (finite networks only): Adam's
    moments (m, v) per weight, ψ = m̂/(√v̂ + ε) in w-units (ε n^{−g_l}, §10.3), and
    W ← (1 − s δ_l) W − s η_l n^{−(a_l + c_l)} κ_l T(ψ)."""

    exact_linear = False

    def __init__(self, opt: SpectralUpdate):
        self.opt = opt

    def finite_state(self, W, l: int, layers: int, backend) -> tuple:
        return (backend.xp.zeros_like(W), backend.xp.zeros_like(W))

    def finite_step(self, W, state, G, X, const, l, t, backend, rate=1.0):
        opt, xp = self.opt, backend.xp
        g_w = backend.matmul(G.T, X)
        g_w *= const.w_scale[l]                                 # gradient in w-units
        psi = opt.base.direction(state, g_w, t, xp, opt.base.eps * const.eps_scale[l])
        sides = (W.shape[0] == const.width) + (W.shape[1] == const.width)
        U = opt.spectral.full(psi, const.width ** (-sides / 2), xp)    # ψ̃: Θ(1) Frobenius
        spectral_step(W, U, opt, const, l, rate)

    def finite_state_bytes(self, shape, l, layers, B, T, itemsize):
        """Adam's two moments, ψ, the SVD's two factors and the transform's result."""
        return (6 * shape[0] * shape[1] + min(shape) ** 2) * itemsize

    def particle_state(self, Z, layer):
        return self.opt.base.rule.zeros(Z)                      # Adam's (m, v) per coordinate

    def move_particles(self, Z, state, left, right, lr, alpha, shrink, t, rate, layer,
                       moments=None):
        """The input layer's rows Z^U (N, d) or the readout's columns Z^{nV} (N, d_out): each
        coordinate's Adam direction ψ from its own moments (the coordinate rule with a unit
        negative step returns ψ itself), then Z ← (1 − s δ) Z − s lr κ ψ R with R the
        transform's rows of S = E[ψ ψᵀ] (k × k; docs/theory.md §11.7)."""
        base = self.opt.base
        scale, h = base.coordinate(-1.0, alpha, 0.0, t)
        psi, state = base.rule.apply(Z * 0.0, scale * (left @ right), state, h)
        return move_rows(Z, psi, self.opt.spectral, lr, shrink, rate, layer, moments), state
