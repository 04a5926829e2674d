"""Finite networks against their limit: the slope of the seed-mean gap in the width
(docs/results.md, "Muon", "Spectral-norm and orthogonal initialization", "Residual
blocks at a fixed depth", "Spectral updates").

    python studies/convergence_gap.py muon       [--seeds 8] [--quick]
    python studies/convergence_gap.py init       [--seeds 16] [--quick]
    python studies/convergence_gap.py residual   [--seeds 8] [--quick]
    python studies/convergence_gap.py spectral   [--seeds 8] [--quick]

Each row trains ``--seeds`` finite networks per width of a μP network on the N8 batches
of docs/theory.md §9 (d = 3, d_out = 2, B = 2) and sets their seed mean beside the limit
(the exact linear engine for φ = id, else the Monte Carlo engine with 2¹⁶ particles × 8
replicates).  The seed-mean gap is ConvergenceStudy.bias, the RMS over steps 1…T,
evaluation inputs and outputs of the seed mean minus the limit; its slope is fitted in log-log over the widths.  The last
column is the largest |seed mean − limit| / √(sd²/seeds + SE_limit²) over the entries
after step 0 at the widest width (seeds − 1 and replicates − 1 degrees of freedom).
``--quick`` runs two small widths with 2 seeds and 2¹⁰ particles, to check the script.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

import tp_limits as tp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import N8_LONG  # noqa: E402

NINE_STEPS = dict(N8_LONG, X=np.vstack([N8_LONG["X"]] * 3), Y=np.vstack([N8_LONG["Y"]] * 3))
WIDE = [256, 512, 1024, 2048, 4096, 8192]


def rows(which):
    """(label, net, routine, widths) of each row of the table ``which``."""
    if which == "muon":
        for phi, L in (("tanh", 1), ("tanh", 2), ("tanh", 3), ("id", 1), ("id", 2)):
            net = tp.MLP(tp.mup(L, optimizer="muon"), 3, 2, phi=phi)
            yield (f"{'linear' if phi == 'id' else phi}, L = {L}", net,
                   tp.Routine(lr=0.05, optimizer=tp.Muon(), **NINE_STEPS), WIDE)
    elif which == "init":
        for init, L, opt, widths in (("spectral", 1, "sgd", WIDE + [16384, 32768, 65536]),
                                     ("orthogonal", 1, "sgd", WIDE + [16384, 32768, 65536]),
                                     ("spectral", 2, "sgd", WIDE),
                                     ("spectral", 2, "muon", WIDE)):
            muon = opt == "muon"
            net = tp.MLP(tp.mup(L, optimizer=opt), 3, 2, phi="tanh", init=init)
            yield (f"{init}, L = {L}, {'Muon, η = 0.05' if muon else 'SGD, η = 0.5'}", net,
                   tp.Routine(lr=0.05 if muon else 0.5, optimizer=tp.Muon() if muon else None,
                              **N8_LONG), widths)
    elif which == "spectral":
        base = tp.SGD(momentum=0.9, nesterov=True)
        for name, opt in (("SN", tp.SpectralUpdate(base, "sn")),
                          ("SVC, λ = 4", tp.SpectralUpdate(base, "svc", clip=4.0))):
            for phi, L in (("tanh", 1), ("tanh", 2), ("tanh", 3), ("id", 2)):
                net = tp.MLP(tp.mup(L, optimizer="muon"), 3, 2, phi=phi)
                yield (f"{name}, {'linear' if phi == 'id' else phi}, L = {L}", net,
                       tp.Routine(lr=0.05, optimizer=opt, **NINE_STEPS), WIDE)
    elif which == "residual":
        for phi in ("id", "tanh"):
            net = tp.MLP(tp.mup(5), 3, 2, phi=phi, residual=tp.Residual.depth_mup("sgd"))
            yield phi, net, tp.Routine(lr=0.3, **N8_LONG), WIDE


def gap_row(net, routine, widths, seeds, particles, replicates):
    limit = tp.simulate_limit(net, routine, particles=particles, replicates=replicates,
                              progress=True)
    study = tp.convergence(net, routine, widths, seeds=seeds, limit=limit, keep_runs=True,
                           progress=True)
    # study.bias: the RMS over steps 1..T, inputs and outputs of the seed mean's deviation
    slope = float(np.polyfit(np.log(widths), np.log(study.bias), 1)[0])
    F = np.array([study.run(widths[-1], s).f_eval for s in study.seeds])[:, 1:]
    se_lim = 0.0 if limit.f_eval_se is None else limit.f_eval_se[1:]
    se = np.sqrt(F.var(axis=0, ddof=1) / len(F) + np.square(se_lim))
    ratio = float(np.max(np.abs(F.mean(axis=0) - limit.f_eval[1:]) / se))
    return slope, ratio, limit.meta.get("method", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("table", choices=("muon", "init", "residual", "spectral"))
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    seeds = args.seeds or (16 if args.table == "init" else 8)
    particles, replicates = 2 ** 16, 8
    if args.quick:
        seeds, particles, replicates = 2, 2 ** 10, 2
    print("| network | limit | widths × seeds | slope of the seed-mean gap | at the widest |")
    print("|---|---|---|---|---|")
    for label, net, routine, widths in rows(args.table):
        widths = widths[:2] if args.quick else widths
        started = time.perf_counter()
        slope, ratio, method = gap_row(net, routine, widths, seeds, particles, replicates)
        print(f"| {label} | {'exact' if method == 'exact' else 'Monte Carlo'} | "
              f"{widths[0]}–{widths[-1]} × {seeds} | {slope:+.2f} | {ratio:.1f} SE |  "
              f"({time.perf_counter() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
