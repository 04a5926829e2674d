"""TP4's Table 1 for any list of parametrizations (docs/theory.md §1.5)."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidParametrizationError
from .parametrization import ABC, fmt, fmt_tuple
from .update_rules import update_rule


def _q_formula(optimizer: str) -> str:
    """How q is computed for an optimizer (docs/theory.md §1.1), e.g. '2a_{L+1}+c'."""
    return update_rule(optimizer).q_formula("c").replace(" ", "")


def columns(optimizers) -> tuple:
    """Column names; the q column shows the formula of the optimizers in the table."""
    opts = sorted(set(optimizers))
    q = ("q = " + _q_formula(opts[0]) if len(opts) == 1
         else "q (" + "; ".join(f"{o}: {_q_formula(o)}" for o in opts) + ")")
    return ("name", "a_l", "b_l", "c", "r", q, "p + r = a_{L+1}+b_{L+1}+r",
            "nontrivial", "stable", "feature learning", "kernel")


COLUMNS = columns(["sgd"])


def _yes(b: bool) -> str:
    return "yes" if b else "no"


@dataclass(frozen=True)
class Table:
    """Rows of TP4's Table 1; ``str()`` is plain text, ``.markdown()`` Markdown."""

    columns: tuple
    rows: tuple

    def markdown(self) -> str:
        head = "| " + " | ".join(self.columns) + " |"
        sep = "|" + "|".join("---" for _ in self.columns) + "|"
        body = ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join([head, sep, *body])

    def text(self) -> str:
        widths = [max(len(c), *(len(r[i]) for r in self.rows)) for i, c in enumerate(self.columns)]
        line = lambda cells: "  ".join(x.ljust(w) for x, w in zip(cells, widths)).rstrip()  # noqa
        return "\n".join([line(self.columns), line(["-" * w for w in widths]),
                          *(line(r) for r in self.rows)])

    def __str__(self) -> str:
        return self.text()

    def _repr_markdown_(self) -> str:  # Jupyter
        return self.markdown()


def table(params) -> Table:
    """Render TP4's Table 1 for ``params`` (an ABC or an iterable of them).

    Columns: a_l, b_l, c (per layer when they differ), r, q = 2a_{L+1}+c
    (a_{L+1}+c for Adam), p + r, and the verdicts.
    """
    if isinstance(params, ABC):
        params = [params]
    try:
        params = list(params)
    except TypeError:
        raise InvalidParametrizationError(
            f"table() takes a tp.ABC or a list of them, got {type(params).__name__}") from None
    if not params or not all(isinstance(p, ABC) for p in params):
        raise InvalidParametrizationError(
            "table() needs at least one parametrization (tp.ABC), e.g. table([tp.mup(2)])")
    rows = []
    for p in params:
        k = p.classify()
        c = p.c_global
        rows.append((
            p.name or "-", fmt_tuple(p.a), fmt_tuple(p.b),
            fmt(c) if c is not None else fmt_tuple(p.c),
            fmt(k.r), fmt(k.q), fmt(k.p + k.r),
            _yes(k.nontrivial), _yes(k.stable), _yes(k.feature_learning), _yes(k.kernel_regime)))
    return Table(columns(p.optimizer for p in params), tuple(rows))
