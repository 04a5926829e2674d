"""Learning-rate transfer on the digits task (docs/results.md, "Three grids, one optimum"
and "Learning-rate transfer with Muon").

    python studies/lr_transfer.py grids        [--quick]
    python studies/lr_transfer.py optimizers   [--quick]
    python studies/lr_transfer.py spectral     [--quick]

The task is examples/experiments/lr_sweep_digits.toml's: μP, two hidden tanh layers,
digits 0–2, 8 SGD steps of batch 8, held-out cross-entropy on 40 test images; the limit
with N = 4000 particles × 4 replicates.

``grids``: one optimum seen through three grids (2× from 2 to 128, √2 from 2 to 32, 2^{1/8}
from 4 to 16) at ∞ and at n = 2048 × 8 seeds: η* with its 95 % interval after the
search of every grid minimum, and the grid parabola's (the grid alone), which moves with
the grid.  ``optimizers``: η* at ∞ and at n = 256…4096 × 4 seeds for μP-SGD, μP-Adam,
μP-Muon and the unscaled Muon update (no limit), each on a 2× grid of 8 rates around its
own optimum.  ``spectral``: the same for the spectral condition's updates over Nesterov
momentum (β = 0.95, Muon's default) — spectral normalization, clipping at σ_max/4, and
msign (μP-Muon) — each on a 2× grid of 8 rates around its own optimum.  ``--quick`` runs a tiny version (N = 500, two widths, 2 seeds) to check the
script.
"""
import argparse
import warnings
from pathlib import Path

import numpy as np

import tp_limits as tp
from tp_limits.analysis.lr_sweep import optimum
from tp_limits.experiment import load

ROOT = Path(__file__).resolve().parents[1]


def task():
    exp = load(ROOT / "examples" / "experiments" / "lr_sweep_digits.toml")
    return exp.net, exp.routine


def interval(t) -> str:
    lr, lo, hi = t
    return f"{lr:.3g} [{lo:.3g}, {hi:.3g}]"


def grids(quick):
    net, routine = task()
    particles, seeds, width = (500, 2, 64) if quick else (4000, 8, 2048)
    print("| grid | ∞ (search) | n = %d (search) | ∞ (grid parabola) | n = %d (grid parabola) |"
          % (width, width))
    print("|---|---|---|---|---|")
    for name, lrs in (("2×", 2.0 ** np.arange(1, 8)), ("√2", 2.0 ** np.arange(1, 5.01, 0.5)),
                      ("2^{1/8}", 2.0 ** np.arange(2, 4.001, 0.125))):
        sw = tp.lr_sweep(net, routine, lrs, widths=[width], seeds=seeds, particles=particles,
                         replicates=4, metric="eval_loss", progress=True)
        rival = {k: o.rivals for k, o in sw.optima.items() if o.rivals}
        cells = [interval(sw.optimal_lr["inf"]) + (f" (rival {rival['inf'][0]:.3g})"
                                                    if "inf" in rival else ""),
                 interval(sw.optimal_lr[width]),
                 interval(optimum(sw.lrs, sw.values("inf"), sw.goal)),
                 interval(optimum(sw.lrs, sw.values(width), sw.goal))]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def optimizers(quick):
    mup = {k: tp.mup(2, optimizer=k) for k in ("sgd", "adam", "muon")}
    unscaled = tp.ABC(mup["muon"].a, mup["muon"].b, [-x for x in mup["muon"].a],
                      optimizer="muon", name="Muon, unscaled")
    transfer(quick, (("μP-SGD", mup["sgd"], None, 1.0),
                     ("μP-Adam", mup["adam"], tp.Adam(), 0.125),
                     ("μP-Muon", mup["muon"], tp.Muon(), 0.25),
                     ("Muon, unscaled", unscaled, tp.Muon(), 2.0 ** -7)))


def spectral(quick):
    mup = tp.mup(2, optimizer="muon")
    base = tp.SGD(momentum=0.95, nesterov=True)
    transfer(quick, (("SN", mup, tp.SpectralUpdate(base, "sn"), 2.0 ** -4),
                     ("SVC, λ = 4", mup, tp.SpectralUpdate(base, "svc", clip=4.0), 2.0 ** -4),
                     ("msign (μP-Muon)", mup, tp.SpectralUpdate(base, "msign"), 0.25)))


def transfer(quick, rows):
    """η* at ∞ and per width for each (name, parametrization, optimizer, lowest rate) on a
    2× grid of 8 rates."""
    net, routine = task()
    widths = [64, 128] if quick else [256, 512, 1024, 2048, 4096]
    particles, seeds = (500, 2) if quick else (4000, 4)
    print("| optimizer | ∞ | " + " | ".join(f"n = {w}" for w in widths) + " |")
    print("|---|---|" + "---|" * len(widths))
    for name, param, opt, low in rows:
        r = tp.Routine(routine.X, routine.Y, lr=1.0, loss="xent", batch_size=8, steps=8,
                       eval_inputs=routine.eval_inputs, eval_targets=routine.eval_targets,
                       optimizer=opt)
        sw = tp.lr_sweep(tp.MLP(param, net.d_in, net.d_out, phi="tanh"), r,
                         low * 2.0 ** np.arange(8), widths=widths, seeds=seeds,
                         particles=particles, replicates=4, metric="eval_loss", progress=True)
        rival = {k: o.rivals for k, o in sw.optima.items() if o.rivals}

        def cell(k):
            return interval(sw.optimal_lr[k]) + (f" (rival {rival[k][0]:.3g})" if k in rival
                                                 else "")
        cells = [cell("inf") if "inf" in sw.optimal_lr
                 else "none (unstable)"] + [cell(w) for w in widths]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("table", choices=("grids", "optimizers", "spectral"))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # rivals are in the table
        {"grids": grids, "optimizers": optimizers, "spectral": spectral}[args.table](args.quick)


if __name__ == "__main__":
    main()
