"""The loop the convergence studies share (norm_convergence.py, phases_convergence.py): for
each configuration, the Monte Carlo limit (``--particles`` × ``--replicates`` Sobol'
replicates; Adam with 64 debiased partner particles) and ``--seeds`` finite networks per
width, then one Markdown row: the fitted exponent of the rms distance to the limit with its
95 % interval, the rms at the widest width, and the largest |seed mean − limit| / combined
SE there (``ConvergenceStudy.widest_gap``).  Rows are written to the JSON file as they
finish (a temporary file renamed into place), so an interrupted study keeps them.
"""
import argparse
import time

import tp_limits as tp
from tp_limits.engine.atomic import write_json


def main(configurations, columns, default_json: str) -> None:
    """Run the study: ``configurations()`` yields (cfg, net, routine); ``columns`` is
    ((header, cfg key), ...) for the row's leading cells."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="256,512,1024,2048,4096,8192")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--particles", type=int, default=2 ** 15)
    ap.add_argument("--replicates", type=int, default=8)
    ap.add_argument("--json", default=default_json)
    ap.add_argument("--quick", action="store_true", help="first configuration only")
    a = ap.parse_args()
    widths = [int(w) for w in a.widths.split(",")]
    heads = [h for h, _ in columns] + ["exponent (95 %)", f"rms at n = {widths[-1]}",
                                       f"max gap / SE at n = {widths[-1]}", "seconds"]
    print("| " + " | ".join(heads) + " |\n" + "|---" * len(heads) + "|", flush=True)
    rows = []
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
                   widest_gap_z=study.widest_gap(), seconds=time.perf_counter() - t0)
        rows.append(row)
        cells = [str(cfg[key]) for _, key in columns] + [
            f"{row['exponent']:+.2f} ± {row['exponent_ci']:.2f}", f"{row['rms'][-1]:.2e}",
            f"{row['widest_gap_z']:.2f}", f"{row['seconds']:.0f}"]
        print("| " + " | ".join(cells) + " |", flush=True)
        write_json(a.json, rows)
