"""Tensor Programs IV's Word2Vec experiment on offline data (docs/theory.md §15.6).

    python studies/tp4_word2vec.py [--vocab 5000] [--widths 64,128,256,512,1024] [--seeds 3]
                                   [--epochs 10] [--lr 32] [--json tp4_word2vec.json]
    python studies/tp4_word2vec.py --convergence [--vocab 200]
                                   [--widths 256,512,1024,2048,4096,8192,16384] [--seeds 8]
                                   [--epochs 1]

Needs gensim's test data (``pip install -e ".[text]"``): the Wikipedia excerpt as the
corpus, ``questions-words.txt`` as the analogy questions.  CBOW with negative sampling
(window 5, 5 negatives, batches of 256, subsampling 1e-3, μP with a zero readout, the rate
decaying linearly to 0), trained at each width with ``--seeds`` seeds (a seed draws both the
network and the example stream), in the feature-learning limit (one run per stream seed)
and in the GP/NTK limits (embeddings fixed at initialization: no training changes their
analogy score, so it is computed from the initial embeddings).

Default mode: 3CosAdd accuracy over the analogy questions the vocabulary covers, per model
with a t interval over seeds (seeds − 1 degrees of freedom), the semantic/syntactic split,
and the distance of each finite network's embedding Gram matrix to the limit's with the
same stream (rms over word pairs) with its fitted slope in the width.

``--convergence``: at a small vocabulary, the same distance for outputs f(e_i)_j = (α W²W¹)_ji
(rms over the V × V matrix, per seed; fitted slope), and at the widest width the seed mean
of the final loss (mean over the last 50 steps) minus the limit's with the same stream,
over its standard error (the seeds' paired differences, seeds − 1 degrees of freedom).
Rows go to the JSON file as they finish (a temporary file renamed into place).
"""
import argparse
import json
import math
import time

import numpy as np
from scipy import stats

import tp_limits as tp
from tp_limits.engine.atomic import write_json
from tp_limits.tasks import (
    CBOWStream,
    Vocabulary,
    analogy_scores,
    cbow_network,
    train_cbow,
)


def slope(widths, values):
    """Least-squares slope of log(values) against log(widths), with its 95 % interval."""
    x, y = np.log(widths), np.log(values)
    fit = stats.linregress(x, y)
    t = stats.t.ppf(0.975, len(x) - 2) if len(x) > 2 else math.nan
    return fit.slope, (fit.slope - t * fit.stderr, fit.slope + t * fit.stderr)


def interval(values):
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return float(v.mean()), math.nan
    return float(v.mean()), float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))


def run(net, stream, lr, width, seed):
    T = stream.steps
    r = train_cbow(net, stream, lambda t: lr * (1 - t / T), width, seed=seed, progress=True)
    if not r.status.complete:
        raise SystemExit(f"the run at width {width}, seed {seed} ended early: {r.status}")
    return r


def analogies(a, tokens, questions):
    vocab = Vocabulary.build(tokens, a.vocab)
    q, where = questions.covered(vocab.words)
    semantic = np.array([not s.startswith("gram") for s in where])
    net = cbow_network(tp.mup(1), a.vocab)
    print(f"V = {a.vocab}: {len(q)} of {len(questions)} questions covered "
          f"({semantic.sum()} semantic, {(~semantic).sum()} syntactic)", flush=True)
    rows = []
    gp = analogy_scores(np.eye(a.vocab) * net.limit_sigma[0] ** 2, q)
    rows.append(dict(model="GP/NTK limit", width=None, seed=None, accuracy=float(gp.mean()),
                     semantic=float(gp[semantic].mean()), syntactic=float(gp[~semantic].mean())))
    for seed in range(a.seeds):
        stream = CBOWStream.of(vocab, tokens, window=5, negatives=5, batch_size=256,
                               epochs=a.epochs, sample=1e-3, seed=seed)
        t0 = time.perf_counter()
        lim = run(net, stream, a.lr, math.inf, seed)
        G = lim.gram
        for width in [math.inf] + a.widths:
            r = lim if width == math.inf else run(net, stream, a.lr, width, seed)
            s = r.analogy(q)
            rows.append(dict(model="μ-limit" if width == math.inf else "finite",
                             width=None if width == math.inf else width, seed=seed,
                             accuracy=float(s.mean()), semantic=float(s[semantic].mean()),
                             syntactic=float(s[~semantic].mean()),
                             gram_gap=None if width == math.inf
                             else float(np.sqrt(np.mean((r.gram - G) ** 2))),
                             final_loss=float(r.loss[-50:].mean()),
                             seconds=time.perf_counter() - t0))
            print(rows[-1], flush=True)
            write_json(a.json, rows)
    report(rows, a.widths)


def ordering(label, x, y):
    """'holds' when the paired seed differences x − y are positive on average (t interval
    over seeds), 'fails' when negative beyond it, 'within noise' otherwise."""
    d = np.asarray(x) - np.asarray(y)
    m, h = interval(d) if len(d) > 1 else (float(d.mean()), math.nan)
    verdict = "holds" if m - h > 0 else "fails" if m + h < 0 else "within noise"
    return f"{label}: {verdict} (difference {100 * m:+.2f} ± {100 * h:.2f} points)"


def report(rows, widths):
    """The tables of the module docstring from the study's rows."""
    seeds = sorted({r["seed"] for r in rows if r["seed"] is not None})
    by = {}
    for r in rows:
        by.setdefault((r["model"], r["width"]), {})[r["seed"]] = r
    done = [s for s in seeds if all(s in by.get(("finite", w), {}) for w in widths)]
    print(f"\n| model | width | analogy accuracy (95 %, {len(done)} seeds) | semantic | "
          "syntactic |\n|---|---|---|---|---|")
    keys = [("μ-limit", None)] + [("finite", w) for w in widths[::-1]] + [("GP/NTK limit", None)]
    acc = {}
    for key in keys:
        sel = [by[key][s] for s in (done if key[0] != "GP/NTK limit" else [None])]
        acc[key] = [r["accuracy"] for r in sel]
        m, h = interval(acc[key]) if len(sel) > 1 else (sel[0]["accuracy"], math.nan)
        print(f"| {key[0]} | {'∞' if key[1] is None else key[1]} | {100 * m:.2f} % ± "
              f"{100 * h:.2f} | {100 * np.mean([r['semantic'] for r in sel]):.2f} % | "
              f"{100 * np.mean([r['syntactic'] for r in sel]):.2f} % |")
    gp = acc[("GP/NTK limit", None)][0]
    print("\nOrderings (paired by seed, t interval with seeds − 1 dof):")
    print("* " + ordering(f"μ-limit > n = {widths[-1]}", acc[("μ-limit", None)],
                          acc[("finite", widths[-1])]))
    for wide, narrow in zip(widths[::-1], widths[::-1][1:]):
        print("* " + ordering(f"n = {wide} > n = {narrow}", acc[("finite", wide)],
                              acc[("finite", narrow)]))
    print("* " + ordering(f"n = {widths[0]} > GP/NTK limit", acc[("finite", widths[0])],
                          [gp] * len(done)))
    gaps = [np.sqrt(np.mean([by[("finite", w)][s]["gram_gap"] ** 2 for s in done]))
            for w in widths]
    s, ci = slope(widths, gaps)
    print("\nGram distance to the limit (rms over seeds): "
          + ", ".join(f"n = {w}: {g:.4f}" for w, g in zip(widths, gaps))
          + f"; slope {s:.3f} (95 %: {ci[0]:.3f} … {ci[1]:.3f})")
    agap = [abs(np.mean(acc[("finite", w)]) - np.mean(acc[("μ-limit", None)])) for w in widths]
    if all(g > 0 for g in agap):
        s, ci = slope(widths, agap)
        print("accuracy gap |finite − μ-limit| (seed means): "
              + ", ".join(f"n = {w}: {100 * g:.2f}" for w, g in zip(widths, agap))
              + f" points; slope {s:.3f} (95 %: {ci[0]:.3f} … {ci[1]:.3f})")


def convergence(a, tokens):
    vocab = Vocabulary.build(tokens, a.vocab)
    net = cbow_network(tp.mup(1), a.vocab)
    eye = np.eye(a.vocab)
    rows, gaps, loss_diff = [], {w: [] for w in a.widths}, []
    for seed in range(a.seeds):
        stream = CBOWStream.of(vocab, tokens, window=5, negatives=5, batch_size=256,
                               epochs=a.epochs, sample=1e-3, seed=seed)
        lim = run(net, stream, a.lr, math.inf, seed)
        F = lim.output(eye)
        for w in a.widths:
            r = run(net, stream, a.lr, w, seed)
            gaps[w].append(float(np.sqrt(np.mean((r.output(eye) - F) ** 2))))
            if w == a.widths[-1]:
                loss_diff.append(float(r.loss[-50:].mean() - lim.loss[-50:].mean()))
            rows.append(dict(seed=seed, width=w, output_gap=gaps[w][-1]))
            write_json(a.json, rows)
        print(f"seed {seed}: " + ", ".join(f"{w}: {gaps[w][-1]:.4f}" for w in a.widths),
              flush=True)
    rms = [float(np.sqrt(np.mean(np.square(gaps[w])))) for w in a.widths]
    s, ci = slope(a.widths, rms)
    d = np.array(loss_diff)
    z = d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))
    print(f"\nV = {a.vocab}, {stream.steps} steps: output distance to the limit (rms over "
          f"{a.seeds} seeds): " + ", ".join(f"n = {w}: {g:.2e}" for w, g in zip(a.widths, rms))
          + f"\nslope {s:.3f} (95 %: {ci[0]:.3f} … {ci[1]:.3f}); at n = {a.widths[-1]} the "
          f"final loss's seed-mean gap is {d.mean():+.2e} = {z:+.2f} SE ({len(d) - 1} dof)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--convergence", action="store_true")
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--widths")
    ap.add_argument("--seeds", type=int)
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--lr", type=float, default=32.0)
    ap.add_argument("--json", default="tp4_word2vec.json")
    ap.add_argument("--report", action="store_true",
                    help="print the tables from the JSON file of an earlier run")
    a = ap.parse_args()
    conv = a.convergence
    a.vocab = a.vocab or (200 if conv else 5000)
    a.widths = [int(w) for w in (a.widths or ("256,512,1024,2048,4096,8192,16384" if conv
                                              else "64,128,256,512,1024")).split(",")]
    a.seeds = a.seeds or (8 if conv else 3)
    a.epochs = a.epochs or (1 if conv else 10)
    if a.report and not conv:
        with open(a.json) as fh:
            report(json.load(fh), a.widths)
        return
    tokens = tp.datasets.wiki_excerpt()
    if conv:
        convergence(a, tokens)
    else:
        analogies(a, tokens, tp.datasets.analogy_questions())


if __name__ == "__main__":
    main()
