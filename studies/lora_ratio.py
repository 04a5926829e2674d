"""LoRA+'s learning-rate ratio computed: the toy network's optimal (η_A, η_B) at every width
and in the limit (docs/theory.md §16.5).

    python studies/lora_ratio.py [--readout mup] [--phi tanh] [--init zero_B]
                                 [--widths 128,256,...,8192] [--seeds 4] [--steps 100]
                                 [--particles 16384] [--out lora_ratio_mup.npz]

The toy f = W_out φ((α/r) B A φ(W_in ξ)) with d = 5, r = 4, α = r, φ = tanh, B₀ = 0, on
LoRA+'s task y = sin(mean ξ) (128 training and 128 test inputs), only A and B trained by
full-batch Adam for ``--steps`` steps.  Grid: width-free η̄_A ∈ 2^{2..9}, η̄_B ∈ 2^{−8..−1},
run at width n as (η̄_A n^{−c_A}, η̄_B n^{−c_B}) with the classifier's maximal stable
exponents — (1, 0) for ``--readout mup`` (W_out = ω/n), (1, ½) for ``--readout sp``
(W_out ~ N(0, 1/n), LoRA+'s experiment; finite widths only, its limit has no feature
learning).  Metric: the final training loss, seed mean.  Reported: per width the best pair,
the refined ratio η_B*/η_A* and its distance from the limit's best point in grid steps,
and the fitted slope of log(η_B*/η_A*) against log n; then, holding η̄_A at each of a few
grid values, the best η̄_B's grid index per width and the slope of that ratio (the good
pairs lie along a valley where the 2-d optimum is ill-determined, docs/theory.md §16.5).  The sweep is saved as it ends
(RateSweep.save, an atomic write).  ``--phi relu --init gaussian`` is the configuration of
LoRA+'s experiment (both factors Gaussian, since with relu a zero factor is a saddle), with
the μP readout; its file is lora_ratio_mup_relu_gaussian.npz.

    python studies/lora_ratio.py --convergence [--widths 256,...,8192] [--seeds 8]

At η̄ = (8, 1/32) (the limit's best η̄_B at η̄_A = 8): each network's test outputs against the conditional limit given the
network's own Z_A⁰ (65536 particles): rms distance per width with its fitted slope; and
the seed-mean final test loss against the limit's mean over Z_A⁰ (16 replicates) in
combined standard errors.

    python studies/lora_ratio.py --report

prints the Markdown tables of docs/results.md from the saved files.
"""
import argparse
import json
import math
import os

import numpy as np
from scipy import stats

from tp_limits.adapters.engine import fine_tune
from tp_limits.adapters.sweep import RateSweep, rate_sweep
from tp_limits.adapters.toy import LoRAToy, sine_task
from tp_limits.engine.atomic import write_json

ETA_A = tuple(2.0 ** k for k in range(2, 10))
ETA_B = tuple(2.0 ** k for k in range(-8, 0))
CONV_RATES = (8.0, 1.0 / 32)
WIDTHS = "128,256,512,1024,2048,4096,8192"
#: the rows of the grid whose best η̄_B is reported (LoRA+'s "fix η_A, tune the ratio")
AT_ETA_A = (8.0, 16.0, 32.0, 64.0)


def toy_for(readout, phi="tanh", init="zero_B"):
    return LoRAToy(readout=readout, phi=phi, init=init)


def name(readout, phi="tanh", init="zero_B"):
    extra = "" if (phi, init) == ("tanh", "zero_B") else f"_{phi}_{init}"
    return f"lora_ratio_{readout}{extra}.npz"


def task():
    return sine_task(d=5, n_train=128, n_test=128, seed=0)


def sweep(a):
    widths = tuple(int(w) for w in a.widths.split(","))
    sw = rate_sweep(toy_for(a.readout, a.phi, a.init), task(), widths, ETA_A, ETA_B, steps=a.steps,
                    seeds=a.seeds, metric="train", include_limit=a.readout == "mup",
                    particles=a.particles)
    out = a.out or name(a.readout, a.phi, a.init)
    sw.save(out)
    print(sw.table().text())
    print("ratio exponent (slope, se, dof):", sw.ratio_exponent())


def convergence(a):
    toy, data = toy_for("mup"), task()
    widths = tuple(int(w) for w in a.widths.split(","))
    lim = fine_tune(toy, data, math.inf, *CONV_RATES, steps=a.steps, seeds=16,
                    particles=16384, progress=True)
    m0, se0, dof0 = lim.mean_se()
    rows = {"limit": [m0, se0, dof0], "widths": {}}
    for n in widths:
        run = fine_tune(toy, data, n, *toy.rates(n, *CONV_RATES), steps=a.steps,
                        seeds=a.seeds, progress=True)
        d = []
        for k in range(a.seeds):
            c = fine_tune(toy, data, math.inf, *CONV_RATES, steps=a.steps, seeds=1,
                          seed=1000 + k, particles=65536, z_a0=run.z_a0[k])
            d.append(float(np.mean((c.f_test[0] - run.f_test[k]) ** 2)))
        m, se, dof = run.mean_se()
        rows["widths"][n] = {"rms": math.sqrt(np.mean(d)), "per_seed": d, "mean": m,
                             "se": se, "dof": dof,
                             "z": (m - m0) / math.hypot(se, se0)}
        print(n, rows["widths"][n]["rms"], rows["widths"][n]["z"], flush=True)
        write_json("lora_convergence.json", rows)
    fit = stats.linregress(np.log(widths), np.log([rows["widths"][n]["rms"]
                                                   for n in widths]))
    print(f"rms slope {fit.slope:.3f} ± {fit.stderr:.3f} ({len(widths) - 2} dof)")


def report():
    for readout, phi, init in (("mup", "tanh", "zero_B"), ("sp", "tanh", "zero_B"),
                               ("mup", "relu", "gaussian")):
        path = name(readout, phi, init)
        if not os.path.exists(path):
            continue
        sw = RateSweep.load(path)
        print(f"\nreadout = {readout}, φ = {phi}, init = {init}, exponents {sw.exponents}\n")
        print(sw.table().markdown())
        s, se, dof = sw.ratio_exponent()
        print(f"\n2-d optimum: slope {s:.3f} ± {se:.3f} (se, {dof} dof)\n")
        print("| η̄_A held at | best η̄_B index per width (∞ last, when run) | slope of η_B*/η_A* |")
        print("|---|---|---|")
        for a in AT_ETA_A:
            idx = [sw.best_index(k, a)[1] for k in range(len(sw.widths))]
            s, se, dof = sw.ratio_exponent(a)
            print(f"| {a:g} | {', '.join(map(str, idx))} | {s:.3f} ± {se:.3f} ({dof} dof) |")
    if os.path.exists("lora_convergence.json"):
        rows = json.load(open("lora_convergence.json"))
        m0, se0, dof0 = rows["limit"]
        print(f"\nlimit mean final test loss {m0:.5f} ± {se0:.5f} ({dof0} dof)\n")
        print("| width | rms(f − f_∞ given Z_A⁰) | mean final test loss | gap / SE |")
        print("|---|---|---|---|")
        ws = sorted(rows["widths"], key=int)
        for n in ws:
            r = rows["widths"][n]
            print(f"| {n} | {r['rms']:.4f} | {r['mean']:.5f} ± {r['se']:.5f} | "
                  f"{r['z']:+.2f} |")
        fit = stats.linregress(np.log([int(n) for n in ws]),
                               np.log([rows["widths"][n]["rms"] for n in ws]))
        print(f"\nrms slope {fit.slope:.3f} ± {fit.stderr:.3f} ({len(ws) - 2} dof)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--readout", default="mup", choices=("mup", "sp"))
    ap.add_argument("--phi", default="tanh", choices=("tanh", "relu"))
    ap.add_argument("--init", default="zero_B", choices=("zero_B", "zero_A", "gaussian"))
    ap.add_argument("--widths", default=WIDTHS)
    ap.add_argument("--seeds", type=int, default=None, help="4 for a sweep, 8 for --convergence")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--particles", type=int, default=16384,
                    help="the limit's particles per replicate")
    ap.add_argument("--out", default=None)
    ap.add_argument("--convergence", action="store_true")
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args()
    if a.report:
        report()
    elif a.convergence:
        if a.widths == WIDTHS:
            a.widths = ",".join(WIDTHS.split(",")[1:])
        if a.seeds is None:
            a.seeds = 8
        convergence(a)
    else:
        a.seeds = a.seeds or 4
        sweep(a)


if __name__ == "__main__":
    main()
