"""TP4's Table 1 for any list of parametrizations (docs/theory.md §1.5)."""
from __future__ import annotations

from dataclasses import dataclass

from .parametrization import ABC, fmt, fmt_tuple

COLUMNS = ("name", "a_l", "b_l", "c", "r", "q = 2a_{L+1}+c", "p + r = a_{L+1}+b_{L+1}+r",
           "nontrivial", "stable", "feature learning", "kernel")


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
    rows = []
    for p in params:
        k = p.classify()
        c = p.c_global
        rows.append((
            p.name or "-", fmt_tuple(p.a), fmt_tuple(p.b),
            fmt(c) if c is not None else fmt_tuple(p.c),
            fmt(k.r), fmt(k.q), fmt(k.p + k.r),
            _yes(k.nontrivial), _yes(k.stable), _yes(k.feature_learning), _yes(k.kernel_regime)))
    return Table(COLUMNS, tuple(rows))
