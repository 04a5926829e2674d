"""Small plotting helpers shared by the analysis figures."""
from __future__ import annotations


def width_axis(ax, widths) -> None:
    """A log x axis labelled with the widths themselves (no 3×10² minor clutter)."""
    from matplotlib.ticker import NullLocator
    ax.set_xscale("log")
    ax.set_xticks([float(w) for w in widths], [str(int(w)) for w in widths])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("width n")


def log_values_axis(ax) -> None:
    """A log y axis whose labels do not overprint: over less than a decade matplotlib
    labels the minor ticks (2×10⁻¹, 3×10⁻¹, …) as well, in the major labels' font; here
    only a few plain numbers are labelled."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=8))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
