"""Tensor Programs IV's few-shot experiment on offline data: first-order MAML on digits
(docs/theory.md §15.6).

    python studies/tp4_maml.py [--shots 1,5] [--widths 2,4,8,16,32,64,128,256,512,1024]
                               [--seeds 4] [--steps 1000] [--json tp4_maml.json]

Few-shot pools from scikit-learn's digits under the 8 symmetries of the square (80
classes, each (digit, view) pair one class): the 40 classes of the digits 0–4 for
meta-training, the 40 of 5–9 for meta-testing.  5-way tasks with 15 queries per class;
16 tasks per meta-step; the linear one-hidden-layer network with an input bias and a zero
readout, μP.  For each shot count the inner and outer base rates are chosen on
meta-validation tasks drawn from the meta-training classes (never the test classes), for
the μ-limit and for the GP limit separately, over the grid inner ∈ {1, 4, 16}, outer ∈
{0.003, 0.01, 0.03, 0.1}; the finite networks use the μ-limit's choice (μP's rates do not
depend on the width).  Reported: meta-test accuracy on 500 test tasks (the same for
every model), mean over ``--seeds`` seeds (a seed draws the network and the meta-training
tasks) with a t interval (seeds − 1 degrees of freedom), and the rms distance of each width's
per-task test loss to the limit's with the same task seed, with its fitted slope.
Rows go to the JSON file as they finish (a temporary file renamed into place).

    python studies/tp4_maml.py --convergence [--shots 1] [--widths 128,256,512,1024,2048,4096]
                               [--seeds 8] [--steps 300]

Finite networks against the exact μ-limit with the same meta-training tasks (inner rate 1,
outer rate 0.03: the metric moves), per seed the mean over 500 test tasks of the test loss
after adaptation: its rms distance to the limit's with a fitted slope, and at the widest
width the seed mean of the difference over its standard error (seeds − 1 degrees of
freedom).

    python studies/tp4_maml.py --metric

The μ-limit's learned metric K = AAᵀ at 1 shot, inner rate 1, 1000 meta-steps, for outer
rates 0.003, 0.01, 0.03 (docs/theory.md §15.5): its participation ratio (tr K)²/tr K² and
the leading eigenvalue's share of tr K, |A|/|A₀| and |C|, and the accuracy after one inner
step on 500 meta-test tasks, on 500 new tasks of the meta-training classes, with the
readout zeroed, and with A rescaled to its initial norm as well.
"""
import argparse
import json
import math
import time

import numpy as np
from scipy import stats

import tp_limits as tp
from tp_limits.engine.atomic import write_json
from tp_limits.tasks.maml import MAML, maml_network, meta_test, train_maml

INNER = (1.0, 4.0, 16.0)
OUTER = (0.003, 0.01, 0.03, 0.1)


def interval(v):
    v = np.asarray(v, dtype=float)
    return float(v.mean()), float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))


def ordering(label, x, y):
    """'holds' when the paired seed differences x − y are positive on average (t interval
    over seeds), 'fails' when negative beyond it, 'within noise' otherwise."""
    m, h = interval(np.asarray(x) - np.asarray(y))
    verdict = "holds" if m - h > 0 else "fails" if m + h < 0 else "within noise"
    return f"{label}: {verdict} (difference {m:+.3f} ± {h:.3f})"


def report(rows, shots, widths):
    """The accuracy table and the paper's orderings for ``shots`` from the study's rows."""
    acc = {}
    for r in rows:
        if r["shots"] == shots:
            key = r["width"] if r["model"] == "finite" else r["model"]
            acc.setdefault(key, {})[r["seed"]] = r["accuracy"]
    seeds = sorted(set.intersection(*(set(v) for v in acc.values())))
    col = {k: [v[s] for s in seeds] for k, v in acc.items()}
    print(f"\n{shots}-shot 5-way, meta-test accuracy ({len(seeds)} seeds, 95 % t interval):\n"
          "| model | width | accuracy |\n|---|---|---|")
    for key in ["feature"] + widths[::-1] + ["gp"]:
        m, h = interval(col[key])
        name = {"feature": "μ-limit", "gp": "GP/NTK limit"}.get(key, "finite")
        print(f"| {name} | {key if isinstance(key, int) else '∞'} | {m:.3f} ± {h:.3f} |")
    print("Orderings (paired by seed, t interval with seeds − 1 dof):")
    print("* " + ordering(f"μ-limit > n = {widths[-1]}", col["feature"], col[widths[-1]]))
    for wide, narrow in zip(widths[::-1], widths[::-1][1:]):
        print("* " + ordering(f"n = {wide} > n = {narrow}", col[wide], col[narrow]))
    print("* " + ordering(f"n = {widths[-1]} > GP/NTK limit", col[widths[-1]], col["gp"]))
    print("* " + ordering("μ-limit > GP/NTK limit", col["feature"], col["gp"]))
    gap = [abs(np.mean(col[w]) - np.mean(col["feature"])) for w in widths]
    keep = [(w, g) for w, g in zip(widths, gap) if g > 0]
    if len(keep) > 2:
        fit = stats.linregress(np.log([w for w, _ in keep]), np.log([g for _, g in keep]))
        print("accuracy gap |finite − μ-limit| (seed means): "
              + ", ".join(f"n = {w}: {g:.3f}" for w, g in keep)
              + f"; slope {fit.slope:.3f} ± {2 * fit.stderr:.3f}")


def choose(net, train, limit, steps):
    """The (inner, outer) of the grid with the best meta-validation accuracy: tasks of the
    meta-training classes drawn with a seed no training run uses."""
    best = None
    for inner in INNER:
        for outer in OUTER:
            r = train_maml(net, MAML(inner, outer, 16, steps, seed=100), train, train,
                           math.inf, limit=limit, test_tasks=300, test_seed=101)
            acc = float(np.mean(r.accuracy)) if r.status.complete else -1.0
            if best is None or acc > best[0]:
                best = (acc, inner, outer)
    return best


def convergence(a):
    shots = int(a.shots.split(",")[0])
    widths = [int(w) for w in a.widths.split(",")]
    train, test = tp.datasets.digits_fewshot(shots=shots)
    net = maml_network(tp.mup(1), train.d_in, 5)
    diff = {w: [] for w in widths}
    for seed in range(a.seeds):
        maml = MAML(1.0, 0.03, 16, a.steps, seed)
        lim = train_maml(net, maml, train, test, math.inf).test_loss.mean()
        for w in widths:
            r = train_maml(net, maml, train, test, w, seed=seed)
            if not r.status.complete:
                raise SystemExit(f"the run at width {w}, seed {seed} ended early: {r.status}")
            diff[w].append(float(r.test_loss.mean() - lim))
        print(f"seed {seed}: " + ", ".join(f"{w}: {diff[w][-1]:+.2e}" for w in widths),
              flush=True)
    rms = [float(np.sqrt(np.mean(np.square(diff[w])))) for w in widths]
    fit = stats.linregress(np.log(widths), np.log(rms))
    d = np.array(diff[widths[-1]])
    z = d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))
    print(f"\n{shots}-shot, {a.steps} meta-steps: mean test loss's distance to the limit (rms "
          f"over {a.seeds} seeds): " + ", ".join(f"n = {w}: {g:.2e}" for w, g in zip(widths, rms))
          + f"\nslope {fit.slope:.3f} ± {2 * fit.stderr:.3f}; at n = {widths[-1]} the seed-mean "
          f"gap is {d.mean():+.2e} = {z:+.2f} SE ({len(d) - 1} dof)")


def metric():
    train, test = tp.datasets.digits_fewshot(shots=1)
    net = maml_network(tp.mup(1), train.d_in, 5)
    test_tasks = test.sample(np.random.default_rng(1), 500)
    train_tasks = train.sample(np.random.default_rng(7), 500)
    A0 = np.eye(train.d_in)

    def acc(A, C, tasks):
        return meta_test(A, C, tasks, (1.0, 1.0), 1.0)[0].mean()

    def spectrum(A):
        ev = np.linalg.eigvalsh(A @ A.T)
        return ev.sum() ** 2 / (ev ** 2).sum(), ev[-1] / ev.sum()
    pr0, top0 = spectrum(A0)
    print(f"initial metric: participation ratio {pr0:.1f}, leading share {100 * top0:.1f} %, "
          f"accuracy {acc(A0, np.zeros((5, train.d_in)), test_tasks):.3f}\n"
          "| outer rate | participation ratio | leading share | norm of A / A₀ | norm of C | "
          "test accuracy | training-class accuracy | readout zeroed | and A rescaled |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for outer in (0.003, 0.01, 0.03):
        r = train_maml(net, MAML(1.0, outer, 16, 1000, 0), train, test, math.inf)
        A, C = r.weights
        pr, top = spectrum(A)
        scale = np.linalg.norm(A) / np.linalg.norm(A0)
        print(f"| {outer} | {pr:.1f} | {100 * top:.1f} % | {scale:.3f} | {np.linalg.norm(C):.3f} "
              f"| {acc(A, C, test_tasks):.3f} | {acc(A, C, train_tasks):.3f} "
              f"| {acc(A, 0 * C, test_tasks):.3f} | {acc(A / scale, 0 * C, test_tasks):.3f} |",
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shots", default="1,5")
    ap.add_argument("--widths", default="2,4,8,16,32,64,128,256,512,1024")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--json", default="tp4_maml.json")
    ap.add_argument("--report", action="store_true",
                    help="print the tables from the JSON file of an earlier run")
    ap.add_argument("--metric", action="store_true",
                    help="the learned metric's spectrum and accuracies (theory §15.5)")
    ap.add_argument("--convergence", action="store_true",
                    help="finite networks against the exact limit (widths to 4096)")
    a = ap.parse_args()
    if a.metric:
        return metric()
    if a.convergence:
        a.widths = "128,256,512,1024,2048,4096" if a.widths == ap.get_default("widths") \
            else a.widths
        a.seeds = 8 if a.seeds == ap.get_default("seeds") else a.seeds
        a.steps = 300 if a.steps == ap.get_default("steps") else a.steps
        return convergence(a)
    widths = [int(w) for w in a.widths.split(",")]
    if a.report:
        with open(a.json) as fh:
            rows = json.load(fh)
        for shots in sorted({r["shots"] for r in rows}):
            report(rows, shots, widths)
        return
    rows = []
    for shots in (int(s) for s in a.shots.split(",")):
        train, test = tp.datasets.digits_fewshot(shots=shots)
        net = maml_network(tp.mup(1), train.d_in, 5)
        picks = {lim: choose(net, train, lim, a.steps) for lim in ("feature", "gp")}
        print(f"{shots}-shot: meta-validation picks (accuracy, inner, outer): {picks}",
              flush=True)
        _, inner, outer = picks["feature"]
        gaps = {w: [] for w in widths}
        for seed in range(a.seeds):
            t0 = time.perf_counter()
            runs = {}
            for lim in ("feature", "gp"):
                _, i, o = picks[lim]
                runs[lim] = train_maml(net, MAML(i, o, 16, a.steps, seed), train, test,
                                       math.inf, limit=lim)
            for w in widths:
                runs[w] = train_maml(net, MAML(inner, outer, 16, a.steps, seed), train, test,
                                     w, seed=seed)
                gaps[w].append(float(np.sqrt(np.mean((runs[w].test_loss
                                                      - runs["feature"].test_loss) ** 2))))
            stopped = [k for k, r in runs.items() if r.status.interrupted]
            if stopped:
                raise SystemExit(f"interrupted during seed {seed}: the {len(rows)} rows of the "
                                 f"seeds before are in {a.json}; this seed is not")
            for key, r in runs.items():
                rows.append(dict(shots=shots, model=key if isinstance(key, str) else "finite",
                                 width=key if isinstance(key, int) else None, seed=seed,
                                 accuracy=float(np.mean(r.accuracy)),
                                 test_loss_gap=gaps[key][-1] if key in gaps else None,
                                 complete=r.status.complete))
            write_json(a.json, rows)
            print(f"seed {seed} done in {time.perf_counter() - t0:.0f} s", flush=True)
        report(rows, shots, widths)
        rms = [np.sqrt(np.mean(np.square(gaps[w]))) for w in widths]
        wide = [w for w in widths if w >= 64]
        fit = stats.linregress(np.log(wide), np.log([rms[widths.index(w)] for w in wide]))
        print("test-loss distance to the μ-limit (rms over tasks and seeds): "
              + ", ".join(f"n = {w}: {g:.3g}" for w, g in zip(widths, rms))
              + f"; slope over n >= 64: {fit.slope:.3f} ± {2 * fit.stderr:.3f}\n", flush=True)


if __name__ == "__main__":
    main()
