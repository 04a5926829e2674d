"""A 2-D slice of abc-exponent space coloured by regime (docs/theory.md §1.2).

Two exponents vary on an exact rational grid, the others are taken from a
base parametrization; every grid point is classified exactly.  Kernel and
feature-learning parametrizations sit on lower-dimensional sets (they need
an equality such as q = 1 or p + r = 1), so they are drawn as markers on
top of the filled unstable/trivial background instead of as areas.
"""
from __future__ import annotations

import re
from fractions import Fraction

from ..abc.parametrization import ABC, parse_exponent
from ..errors import InvalidParametrizationError

REGIME_COLORS = {"unstable": "#d9d9d9", "trivial": "#c6dbef",
                 "kernel": "#fd8d3c", "feature_learning": "#31a354"}
REGIME_LABELS = {"unstable": "unstable", "trivial": "stable, trivial",
                 "kernel": "kernel regime", "feature_learning": "feature learning"}

_NAME = re.compile(r"^([abc])(?:_?\{?(\d+|L\+1)\}?)?$")


def parse_axis(name: str, L: int) -> tuple:
    """'c' -> ('c', None) (every layer); 'b_3', 'b3', 'a_{L+1}' -> (letter, index 0..L)."""
    m = _NAME.match(name.replace(" ", ""))
    if not m:
        raise InvalidParametrizationError(
            f"axis {name!r}: use 'a_l', 'b_l', 'c_l' with l in 1..L+1 (or 'L+1'), or 'c'")
    letter, idx = m.groups()
    if idx is None:
        if letter != "c":
            raise InvalidParametrizationError(f"axis {name!r} needs a layer index, e.g. '{letter}_1'")
        return letter, None
    i = L + 1 if idx == "L+1" else int(idx)
    if not 1 <= i <= L + 1:
        raise InvalidParametrizationError(f"axis {name!r}: layer index must be in 1..{L + 1}")
    return letter, i - 1


def with_value(param: ABC, axis: tuple, value) -> ABC:
    """A copy of ``param`` with one exponent (or every c_l) replaced."""
    letter, idx = axis
    vals = {k: list(getattr(param, k)) for k in "abc"}
    if idx is None:
        vals["c"] = [value] * (param.L + 1)
    else:
        vals[letter][idx] = value
    return ABC(vals["a"], vals["b"], vals["c"], param.optimizer, param.name)


#: Grid points per axis: each point is an exact classification (milliseconds each).
MAX_POINTS_PER_AXIS = 201


def _grid(lo, hi, step) -> list:
    try:
        lo, hi, step = (Fraction(str(parse_exponent(v, "range"))) for v in (lo, hi, step))
    except (ValueError, TypeError):
        raise InvalidParametrizationError(
            "ranges and step must be numbers (e.g. x_range=(-2, 2), step='1/8')") from None
    if step <= 0 or hi <= lo:
        raise InvalidParametrizationError("ranges need lo < hi and a positive step")
    n = int((hi - lo) / step)
    if n + 1 > MAX_POINTS_PER_AXIS:
        raise InvalidParametrizationError(
            f"the range {lo}..{hi} with step {step} has {n + 1} points; at most "
            f"{MAX_POINTS_PER_AXIS} per axis are supported (use a larger step)")
    return [lo + k * step for k in range(n + 1)]


def _on_slice(p: ABC, base: ABC, ax_x: tuple, ax_y: tuple) -> bool:
    """True when p equals base in every exponent except the two varied ones."""
    if p.L != base.L or p.optimizer != base.optimizer:
        return False
    if (None in (ax_x[1], ax_y[1])) and p.c_global is None:
        return False  # the slice varies one global c; p has per-layer c
    probe = with_value(with_value(p, ax_x, 0), ax_y, 0)
    ref = with_value(with_value(base, ax_x, 0), ax_y, 0)
    return probe == ref


def regime_grid(param: ABC, x: str, y: str, x_range=(-2, 2), y_range=(-2, 2), step="1/8"):
    """Exact regimes on the grid: (xs, ys, regimes[j][i] for y_j, x_i)."""
    ax_x, ax_y = parse_axis(x, param.L), parse_axis(y, param.L)
    if ax_x == ax_y:
        raise InvalidParametrizationError("x and y must be different exponents")
    xs, ys = _grid(*x_range, step), _grid(*y_range, step)
    rows = []
    for yv in ys:
        base = with_value(param, ax_y, yv)
        rows.append([with_value(base, ax_x, xv).classify().regime for xv in xs])
    return xs, ys, rows


def phase_diagram(param: ABC, x: str = "c", y: str = "b_{L+1}", x_range=(-2, 2),
                  y_range=(-2, 2), step="1/8", mark=(), ax=None):
    """Plot the regimes of a 2-D slice through ``param``; returns the Figure.

    ``mark`` is an iterable of ABCs (e.g. presets); those lying on the slice
    (equal to ``param`` in every other exponent) are drawn as diamonds, the
    others are skipped.  ``param`` itself is drawn as a star.
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    xs, ys, rows = regime_grid(param, x, y, x_range, y_range, step)
    order = list(REGIME_COLORS)
    codes = np.array([[order.index(r) for r in row] for row in rows])
    fx, fy = np.array(xs, float), np.array(ys, float)
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 5))
    else:
        fig = ax.figure
    bg = np.where(codes >= 2, order.index("trivial"), codes)  # areas: unstable/trivial only
    h = float(xs[1] - xs[0]) / 2
    ax.imshow(bg, origin="lower", cmap=ListedColormap(list(REGIME_COLORS.values())),
              vmin=0, vmax=3, extent=(fx[0] - h, fx[-1] + h, fy[0] - h, fy[-1] + h),
              aspect="auto", interpolation="nearest")
    for regime, size in (("kernel", 14), ("feature_learning", 22)):
        jj, ii = np.nonzero(codes == order.index(regime))
        ax.scatter(fx[ii], fy[jj], s=size, c=REGIME_COLORS[regime], edgecolors="k",
                   linewidths=0.3, zorder=3)
    ax_x, ax_y = parse_axis(x, param.L), parse_axis(y, param.L)

    def coord(p, axis):
        letter, idx = axis
        return float(getattr(p, letter)[0 if idx is None else idx])

    for p in [param, *mark]:
        if not _on_slice(p, param, ax_x, ax_y):
            continue
        px, py = coord(p, ax_x), coord(p, ax_y)
        ax.scatter([px], [py], marker="*" if p is param else "D", s=160 if p is param else 60,
                   c="k" if p is param else "w", edgecolors="k", zorder=4)
        ax.annotate(p.name or "param", (px, py), textcoords="offset points", xytext=(6, 6),
                    fontsize=9, zorder=5)
    ax.set_xlabel(f"${x}$ (exponent)")
    ax.set_ylabel(f"${y}$ (exponent)")
    ax.set_title(f"Regimes of {param.label} (L = {param.L}) varying {x}, {y}")
    ax.legend(handles=[Patch(color=c, label=REGIME_LABELS[k]) for k, c in REGIME_COLORS.items()],
              loc="upper left", fontsize=8, framealpha=0.9)
    return fig


DEPTH_COLORS = {"unstable at init": "#bdbdbd", "unstable in training": "#e6e6e6",
                "trivial in depth": "#c6dbef", "redundant": "#fd8d3c", "Depth-μP": "#31a354",
                "CompleteP": "#756bb1", "unfaithful": "#de2d26"}


def depth_phase_diagram(optimizer: str = "sgd", block_depth: int = 1, alphas=None,
                        gammas=None, ax=None):
    """The depth classes (abc/depth.py, docs/theory.md §12.6) on a grid of branch exponents
    α (x) and rate exponents γ (y), default 21 × 21; the maximal classes lie on the line
    pα + γ = 1 and are drawn as markers.  Returns the Figure."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    from ..abc.depth import depth_grid

    grid = depth_grid(optimizer, block_depth, alphas, gammas)
    xs = sorted({a for a, _ in grid})
    ys = sorted({g for _, g in grid})
    order = list(DEPTH_COLORS)
    codes = np.array([[order.index(grid[(a, g)]) for a in xs] for g in ys])
    fx, fy = np.array(xs, float), np.array(ys, float)
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 5))
    else:
        fig = ax.figure
    areas = np.where(codes >= 3, order.index("trivial in depth"), codes)
    hx, hy = float(xs[1] - xs[0]) / 2, float(ys[1] - ys[0]) / 2
    ax.imshow(areas, origin="lower", cmap=ListedColormap(list(DEPTH_COLORS.values())),
              vmin=0, vmax=len(order) - 1, interpolation="nearest", aspect="auto",
              extent=(fx[0] - hx, fx[-1] + hx, fy[0] - hy, fy[-1] + hy))
    for verdict in order[3:]:
        jj, ii = np.nonzero(codes == order.index(verdict))
        ax.scatter(fx[ii], fy[jj], s=40 if verdict != "redundant" else 14,
                   c=DEPTH_COLORS[verdict], edgecolors="k", linewidths=0.4, zorder=3)
    ax.set_xlabel("branch exponent α (multiplier K^−α)")
    ax.set_ylabel("rate exponent γ (block rates × K^−γ)")
    ax.set_title(f"Depth classes, {optimizer}, blocks of {block_depth}", fontsize=10)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in DEPTH_COLORS.items()],
              loc="upper right", fontsize=7, framealpha=0.9)
    return fig
