"""A pretrained network adapted through LoRA, at width n and in the limit
(docs/theory.md §16.6).

    python studies/lora_pretrained.py [--widths 256,...,8192] [--seeds 8] [--steps 20]
                                      [--particles 131072] [--layer hidden | readout | W2]
                                      [--L 2] [--inputs 64] [--optimizer adam | sgd]
                                      [--rates 1,0.05]
                                      [--out lora_pretrained.json]
    python studies/lora_pretrained.py --report
    python studies/lora_pretrained.py --sweep [--widths 128,...,2048] [--seeds 4]

``--sweep``: LoRA+'s ratio on the pretrained network — rate_sweep over η̄_A ∈ 2^{−1..3},
η̄_B ∈ 2^{−6..0} (30 Adam steps, final training loss, seed mean), the networks pretrained
once per width and seed for every pair; the best η̄_B per width with η̄_A held, and the
fitted slope of η_B*/η_A* against n (Θ(n) predicted, docs/theory.md §16.2), saved to
lora_pretrained_sweep.npz.

Phase one: a μP MLP (L = 2, φ = tanh, d = 5) trained by SGD (η = 0.5, batches of 8, 20
steps) on y = sin(2 ξ₁); at width n by the finite engine, in the limit by the deep Monte
Carlo engine.  Phase two: every weight frozen, an adapter (r = 4, α = r, B₀ = 0) on W²
(``--layer readout``: on W³; ``--L 3 --layer W2``: on the middle matrix of three, the
frozen W³ and readout above it continuing the deep limit) trained by full-batch Adam for
``--steps`` steps at (η̄_A, η̄_B) = ``--rates`` (default (1, 1/20); rates η̄_A/n and η̄_B;
``--optimizer sgd``: SGD at the classifier's rates) on LoRA+'s task y = sin(mean ξ), 64
training and 64 test inputs (``--inputs``).  Reported per width, 8 networks each (every
one pretrained from its own seed, then adapted): the rms distance of the test outputs
from the conditional limit given the network's own Z_A⁰ (one pretrained particle set of
``--particles`` for all), its fitted slope; and the seed-mean final test loss against
the limit's mean over pretraining particles and Z_A⁰ (16 replicates of 16384 particles,
each pretrained on its own) in combined standard errors.  Results are written after every
width (an atomic replace), so an interrupted run keeps its widths.
"""
import argparse
import json
import math

import numpy as np
from scipy import stats

import tp_limits as tp
from tp_limits.adapters import PretrainedLoRA, fine_tune, pretrain, rate_sweep, sine_task
from tp_limits.engine.atomic import write_json

RATES = (1.0, 1.0 / 20)
OUT = "lora_pretrained.json"
WIDTHS = "256,512,1024,2048,4096,8192"


def setup(layer="hidden", L=2, inputs=64, optimizer="adam"):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((160, 5))
    routine = tp.Routine(X, np.sin(2 * X[:, 0]), lr=0.5, batch_size=8, eval_inputs=X[:8])
    pre = PretrainedLoRA(net=tp.MLP(tp.mup(L), 5, 1, phi="tanh"), routine=routine,
                         layer=layer, optimizer=optimizer)
    return pre, sine_task(d=5, n_train=inputs, n_test=inputs, seed=1)


def run(a):
    pre, task = setup(a.layer, a.L, a.inputs, a.optimizer)
    widths = tuple(int(w) for w in a.widths.split(","))
    rates = tuple(float(x) for x in a.rates.split(","))
    lim = fine_tune(pre, task, math.inf, *rates, steps=a.steps, seeds=16, particles=16384,
                    progress=True)
    m0, se0, dof0 = lim.mean_se()
    rows = {"limit": [m0, se0, dof0], "particles": a.particles, "rates": rates,
            "steps": a.steps, "layer": a.layer, "L": a.L, "inputs": a.inputs,
            "optimizer": a.optimizer, "widths": {}}
    base = pretrain(pre, task.x, math.inf, seed=12345, particles=a.particles)
    for n in widths:
        net = fine_tune(pre, task, n, *pre.rates(n, *rates), steps=a.steps, seeds=a.seeds,
                        progress=True)
        d = [float(np.mean((fine_tune(pre, task, math.inf, *rates, steps=a.steps, seeds=1,
                                      frozen=base, z_a0=net.z_a0[k]).f_test[0]
                            - net.f_test[k]) ** 2)) for k in range(a.seeds)]
        m, se, dof = net.mean_se()
        rows["widths"][n] = {"rms": math.sqrt(np.mean(d)), "per_seed": d, "mean": m,
                             "se": se, "dof": dof, "z": (m - m0) / math.hypot(se, se0)}
        print(n, rows["widths"][n]["rms"], rows["widths"][n]["z"], flush=True)
        write_json(a.out, rows)
    report(a.out)


def sweep(a):
    pre, task = setup(a.layer, a.L, a.inputs, a.optimizer)
    widths = tuple(int(w) for w in a.widths.split(","))
    sw = rate_sweep(pre, task, widths, [2.0 ** k for k in range(-1, 4)],
                    [2.0 ** k for k in range(-6, 1)], steps=30, seeds=a.seeds,
                    metric="train", particles=16384)
    sw.save("lora_pretrained_sweep.npz")
    for at in sw.eta_A:
        s, se, dof = sw.ratio_exponent(at)
        idx = [sw.best_index(k, at)[1] for k in range(len(sw.widths))]
        print(f"| {at:g} | {', '.join(map(str, idx))} | {s:.3f} ± {se:.3f} ({dof} dof) |")


def report(out=OUT):
    """The Markdown table of docs/results.md: per width the rms distance from the
    conditional limit over the networks, the median network's, the seed-mean final test
    loss and its gap to the limit's mean; the slopes of both distances."""
    rows = json.load(open(out))
    m0, se0, dof0 = rows["limit"]
    print(f"\nL = {rows.get('L', 2)}, layer {rows.get('layer', 'hidden')}, "
          f"{rows.get('inputs', 64)} training inputs, {rows.get('optimizer', 'adam')}, "
          f"rates {rows.get('rates')}, "
          f"{rows.get('steps')} steps; limit mean final test loss {m0:.5f} ± {se0:.5f} "
          f"({dof0} dof)\n")
    print("| width | rms(f − f_∞ given Z_A⁰) | median network's | mean final test loss "
          "(7 dof) | gap / SE |")
    print("|---|---|---|---|---|")
    ws = sorted(rows["widths"], key=int)
    for n in ws:
        r = rows["widths"][n]
        med = math.sqrt(np.median(r["per_seed"]))
        print(f"| {n} | {r['rms']:.4f} | {med:.4f} | {r['mean']:.5f} ± {r['se']:.5f} | "
              f"{r['z']:+.2f} |")
    if len(ws) > 2:
        x = np.log([int(n) for n in ws])
        for what, y in (("rms", [rows["widths"][n]["rms"] for n in ws]),
                        ("median", [math.sqrt(np.median(rows["widths"][n]["per_seed"]))
                                    for n in ws])):
            fit = stats.linregress(x, np.log(y))
            print(f"\n{what} slope {fit.slope:.3f} ± {fit.stderr:.3f} ({len(ws) - 2} dof)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default=WIDTHS)
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--particles", type=int, default=131072,
                    help="the conditional limit's pretrained particles")
    ap.add_argument("--rates", default=",".join(map(str, RATES)),
                    help="the width-free (eta_A, eta_B)")
    ap.add_argument("--layer", default="hidden", help="hidden, readout or W<l>")
    ap.add_argument("--L", type=int, default=2, help="hidden layers of the MLP")
    ap.add_argument("--optimizer", default="adam", choices=("adam", "sgd"),
                    help="the adapter's optimizer")
    ap.add_argument("--inputs", type=int, default=64,
                    help="training inputs of the fine-tuning task (and as many test inputs)")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    a = ap.parse_args()
    if a.sweep:
        a.widths = a.widths if a.widths != WIDTHS else "128,256,512,1024,2048"
        a.seeds = min(a.seeds, 4) if a.seeds == 8 else a.seeds
        return sweep(a)
    report(a.out) if a.report else run(a)


if __name__ == "__main__":
    main()
