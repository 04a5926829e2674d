"""Exceptions raised by tp_limits.

Every error the library raises on purpose is a :class:`TPError`, so a caller
can catch the whole family.  Each subclass also derives from the built-in
exception a Python user would expect (``ValueError`` for bad values, and so
on), so generic handlers keep working.
"""


class TPError(Exception):
    """Base class of every error raised on purpose by tp_limits."""


class InvalidParametrizationError(TPError, ValueError):
    """An abc-parametrization was malformed (lengths, values, optimizer)."""


class SymbolicParametrizationError(TPError, ValueError):
    """A numeric verdict was requested from a parametrization with free symbols."""


class UnstableParametrizationError(TPError, ValueError):
    """The parametrization has no infinite-width limit (TP4 Thm 3.3 fails)."""


class SpecError(TPError, ValueError):
    """A model or training-routine description is inconsistent or invalid."""


class UnsupportedError(TPError, NotImplementedError):
    """The requested combination is valid mathematics but not implemented."""


class BackendUnavailableError(TPError, ImportError):
    """An optional array backend (CuPy) was requested but cannot be used."""


class DivergenceError(TPError, FloatingPointError):
    """Training produced a non-finite value, or one beyond the divergence bound.

    Attributes ``step``, ``layer`` and ``quantity`` say where it happened;
    ``size`` is the largest magnitude seen (inf or NaN when not finite).  A run
    that stops on it records the same facts as a
    :class:`~tp_limits.engine.status.Divergence` (``Trajectory.status``).
    """

    def __init__(self, step: int, layer, quantity: str, detail: str = "",
                 size: float = float("nan"), bound: float | None = None):
        self.step = step
        self.layer = layer
        self.quantity = quantity
        self.size = size
        where = f"layer {layer}" if layer is not None else "the output"
        what = (f"reached |{quantity}| = {size:.3g}, beyond divergence_bound = {bound:g}"
                if bound is not None and size == size and size != float("inf")
                else f"{quantity} of {where} is not finite")
        if bound is not None and what.startswith("reached"):
            what = f"{what} in {where}"
        msg = (f"training diverged at step {step}: {what}"
               + (f" ({detail})" if detail else "")
               + ". Lower the learning rate, check the parametrization with "
                 "param.classify(), or pass on_divergence='stop' to keep the "
                 "partial trajectory.")
        super().__init__(msg)


class MemoryBudgetError(TPError, MemoryError):
    """A request would need more memory than is available."""
