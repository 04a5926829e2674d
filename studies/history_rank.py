"""How compressible are the deep engine's histories?  The spectrum of each family's Gram
matrix of stored vectors, and its numerical rank against the number of rows B·T.

    python studies/history_rank.py [--N 16384] [--L 3] [--B 4] [--E 8]
        [--T 1000] [--phis tanh,relu,gelu] [--optimizers sgd,momentum,adam]
        [--lr 0.1] [--tols 1e-6,1e-8,1e-10] [--out history_rank.json]
    python studies/history_rank.py --out history_rank.json --plot FILE.png

The routine is bench_deep.py's (μP, d = 2, a random regression task, new inputs every
step).  One deep Monte Carlo run per (φ, optimizer) to T steps keeps every family's
Gram matrix C = σ² ⟨v_i, v_j⟩ of its stored vectors (families.py); the Gram of the
first B·t rows is C's leading block, so one run gives every t ≤ T.  The numerical rank
at a tolerance τ is the number of eigenvalues above τ · λ_max: the rank a history kept
in its leading directions would need.  N must exceed B·T (a Gram of N particles has
rank at most N).  docs/theory.md §4.9 discusses the result.
"""
import argparse
import json
import time

import numpy as np

import tp_limits as tp
from tp_limits.limit import prepare_limit
from tp_limits.limit.montecarlo.montecarlo import DeepRun
from tp_limits.limit.montecarlo.partners import PartnerDeepRun

OPTIMIZERS = {"sgd": (None, "sgd"), "momentum": (tp.SGD(momentum=0.9), "sgd"),
              "adam": (tp.Adam(), "adam")}


def routine(T, B, E, lr, optimizer):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((T * B, 2)) / np.sqrt(2)
    Y = np.tanh(X[:, :1] - X[:, 1:])
    return tp.Routine(X, Y, lr=lr, batch_size=B, optimizer=optimizer,
                      eval_inputs=rng.standard_normal((E, 2)) / np.sqrt(2))


def grams(N, L, B, E, T, phi, opt_name, lr):
    """The run's families' Gram matrices {'F2': C, 'G2': C, ...} (float64, B·T square)."""
    opt, kind = OPTIMIZERS[opt_name]
    net = tp.MLP(tp.mup(L, optimizer=kind), 2, 1, phi=phi)
    r = routine(T, B, E, lr * (0.05 if kind == "adam" else 1.0), opt)
    plan = prepare_limit(net, r, particles=N, replicates=1, record=(), time_budget=None)
    spec = plan.engine.spec
    run = (PartnerDeepRun if spec.partners else DeepRun)(spec, np.random.default_rng(1))
    run.run(lambda t: None)
    out = {}
    for l in range(2, L + 1):
        for name, fam in (("F", run.F[l]), ("G", run.G[l])):
            out[f"{name}{l}"] = np.array(fam.Cv[:fam.k, :fam.k])
    return out


def ranks(C, B, Ts, tols):
    """{t: {τ: rank of the leading B·t block at relative tolerance τ}}."""
    res = {}
    for t in Ts:
        k = B * t
        w = np.linalg.eigvalsh(C[:k, :k])
        top = w.max()
        res[t] = {tol: int(np.sum(w > tol * top)) for tol in tols}
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", type=int, default=16384)
    ap.add_argument("--L", type=int, default=3)
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--E", type=int, default=8)
    ap.add_argument("--T", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--phis", default="tanh,relu,gelu")
    ap.add_argument("--optimizers", default="sgd,momentum,adam")
    ap.add_argument("--tols", default="1e-6,1e-8,1e-10")
    ap.add_argument("--out", default="history_rank.json")
    ap.add_argument("--spectra", default="", help="save the final spectra (.npz)")
    ap.add_argument("--plot", default="", help="draw FILE.png from the --out report "
                                              "(no run)")
    a = ap.parse_args()
    if a.plot:
        return plot(a.out, a.plot)
    if a.N <= a.B * a.T:
        ap.error(f"--N {a.N} must exceed B·T = {a.B * a.T}: the rank is capped at N")
    tols = [float(x) for x in a.tols.split(",")]
    Ts = sorted({t for t in (25, 50, 100, 200, 400, 800, 1000, 1600, 2000) if t <= a.T}
                | {a.T})
    report, spectra = [], {}
    for phi in a.phis.split(","):
        for opt in a.optimizers.split(","):
            t0 = time.perf_counter()
            G = grams(a.N, a.L, a.B, a.E, a.T, phi, opt, a.lr)
            wall = time.perf_counter() - t0
            for fam, C in G.items():
                row = {"phi": phi, "optimizer": opt, "family": fam, "rows": C.shape[0],
                       "run_s": round(wall, 1),
                       "ranks": {str(t): {f"{k:g}": v for k, v in r.items()}
                                 for t, r in ranks(C, a.B, Ts, tols).items()}}
                report.append(row)
                spectra[f"{phi}_{opt}_{fam}"] = np.linalg.eigvalsh(C)[::-1]
                last = row["ranks"][str(a.T)]
                print(f"{phi:5s} {opt:8s} {fam}: B·T = {C.shape[0]:5d}  rank "
                      + "  ".join(f"{k}: {v:5d}" for k, v in last.items()), flush=True)
    with open(a.out, "w") as f:
        json.dump({"args": vars(a), "rows": report}, f, indent=1)
    if a.spectra:
        np.savez(a.spectra, **spectra)


def plot(report: str, path: str) -> None:
    """Numerical rank against B·T, one panel per φ, a line per (family, tolerance) of the
    plain-SGD runs (the other optimizers' lines lie on them within a few per cent)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(report) as f:
        rep = json.load(f)
    B = rep["args"]["B"]
    phis = list(dict.fromkeys(r["phi"] for r in rep["rows"]))
    fig, axes = plt.subplots(1, len(phis), figsize=(4.2 * len(phis), 3.6), sharey=True)
    styles = {"1e-06": "-", "1e-08": "--", "1e-10": ":"}
    for ax, phi in zip(np.atleast_1d(axes), phis):
        rows = [r for r in rep["rows"] if r["phi"] == phi and r["optimizer"] == "sgd"]
        for r, col in zip(rows, plt.cm.viridis(np.linspace(0, 0.85, len(rows)))):
            ts = sorted(int(t) for t in r["ranks"])
            for tol, ls in styles.items():
                ax.plot([B * t for t in ts], [r["ranks"][str(t)][tol] for t in ts], ls,
                        color=col, label=f"{r['family']}, {tol}")
        top = max(B * int(t) for r in rows for t in r["ranks"])
        ax.plot([0, top], [0, top], "k-", lw=0.8, alpha=0.5, label="B·T (no compression)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("stored rows B·T")
        ax.set_title(f"{phi}, SGD: numerical rank at τ")
    np.atleast_1d(axes)[0].set_ylabel("eigenvalues above τ λ_max")
    np.atleast_1d(axes)[-1].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
