"""Finite networks with LayerNorm and RMSNorm against their infinite-width limit
(docs/theory.md §14.5).

    python studies/norm_convergence.py [--widths 256,512,1024,2048,4096,8192] [--seeds 8]
                                       [--particles 32768] [--replicates 8]
                                       [--json out.json] [--quick]

For each normalization (layer, rms), φ (tanh, relu), depth (L = 2, 3), optimizer (μP-SGD
at η = 0.5, μP-Adam at η = 0.02) and architecture (plain; pre-norm residual with
Depth-μP blocks), the Monte Carlo limit (``--particles`` × ``--replicates`` Sobol'
replicates; Adam with 64 debiased partner particles) and ``--seeds`` finite networks per
width on data D1 (docs/theory.md §9).  Reported per configuration: the fitted exponent of
the distance to the limit (rms over seeds) with its 95 % interval, the rms at the widest
width, and the largest |gap| / combined SE over the evaluated outputs after step 0 at
the widest width, where the gap is the seed mean minus the limit and the combined SE is
√(sd²/seeds + SE_limit²) (seeds − 1 and replicates − 1 degrees of freedom).  Rows are
written to the JSON file as they finish (a temporary file renamed into place), so an
interrupted study keeps them.
"""
import argparse
import itertools
import time

import numpy as np

import tp_limits as tp
from tp_limits.engine.atomic import write_json

D1 = dict(X=np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 0.0]]), Y=np.array([[1.0], [-1.0], [1.0]]),
          eval_inputs=np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 1.0]]))


def configurations():
    for norm, phi, L, opt, arch in itertools.product(("layer", "rms"), ("tanh", "relu"), (2, 3),
                                                     ("sgd", "adam"), ("plain", "residual")):
        residual = tp.Residual.depth_mup(opt) if arch == "residual" else None
        net = tp.MLP(tp.mup(L, optimizer=opt), 2, 1, phi=phi, norm=norm, residual=residual)
        adam = opt == "adam"
        routine = tp.Routine(lr=0.02 if adam else 0.5, optimizer=tp.Adam() if adam else None,
                             **D1)
        yield dict(norm=norm, phi=phi, L=L, optimizer=opt, arch=arch), net, routine


def widest_gap(study, limit) -> float:
    """max |seed mean − limit| / √(sd²/S + SE²) at the widest width, steps after 0."""
    runs = np.array([r.f_eval for r in study.runs[-1]])          # (seeds, T+1, E, d_out)
    S = len(runs)
    gap = runs.mean(axis=0)[1:] - limit.f_eval[1:]
    se = np.sqrt(runs.std(axis=0, ddof=1)[1:] ** 2 / S + limit.f_eval_se[1:] ** 2)
    return float(np.max(np.abs(gap) / se))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="256,512,1024,2048,4096,8192")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--particles", type=int, default=2 ** 15)
    ap.add_argument("--replicates", type=int, default=8)
    ap.add_argument("--json", default="norm_convergence.json")
    ap.add_argument("--quick", action="store_true", help="first configuration only")
    a = ap.parse_args()
    widths = [int(w) for w in a.widths.split(",")]
    rows = []
    print("| norm | φ | L | optimizer | architecture | exponent (95 %) | rms at n = "
          f"{widths[-1]} | max gap / SE at n = {widths[-1]} | seconds |\n"
          "|---|---|---|---|---|---|---|---|---|", flush=True)
    for i, (cfg, net, r) in enumerate(configurations()):
        if a.quick and i:
            break
        t0 = time.perf_counter()
        limit = tp.simulate_limit(net, r, particles=a.particles, replicates=a.replicates,
                                  record=(), seed=i,
                                  **(dict(partners=64) if cfg["optimizer"] == "adam" else {}))
        study = tp.convergence(net, r, widths, seeds=a.seeds, limit=limit, keep_runs=True)
        row = dict(cfg, exponent=study.exponent, exponent_ci=study.exponent_ci,
                   rms=study.rms.tolist(), widths=widths, limit_error=study.limit_error,
                   widest_gap_z=widest_gap(study, limit), seconds=time.perf_counter() - t0)
        rows.append(row)
        print(f"| {cfg['norm']} | {cfg['phi']} | {cfg['L']} | {cfg['optimizer']} | "
              f"{cfg['arch']} | {row['exponent']:+.2f} ± {row['exponent_ci']:.2f} | "
              f"{row['rms'][-1]:.2e} | {row['widest_gap_z']:.2f} | {row['seconds']:.0f} |",
              flush=True)
        write_json(a.json, rows)


if __name__ == "__main__":
    main()
