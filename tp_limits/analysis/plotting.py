"""Small plotting helpers shared by the analysis figures."""
from __future__ import annotations


def width_axis(ax, widths) -> None:
    """A log x axis labelled with the widths themselves (no 3×10² minor clutter)."""
    from matplotlib.ticker import NullLocator
    ax.set_xscale("log")
    ax.set_xticks([float(w) for w in widths], [str(int(w)) for w in widths])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("width n")
