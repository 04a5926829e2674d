"""Learning-rate transfer in transformers: μP with 1/d attention against standard practice
with 1/√d attention (docs/results.md#transformer-lr; docs/theory.md §17.5).

    python studies/transformer_lr_transfer.py [--optimizer adam|sgd] [--widths ...]
                                              [--seeds 3] [--steps 10] [--json out.json]
                                              [--quick]

``adam`` (widths 128–1024): one pre-norm block (2 heads, relu MLP, learned positions) on
the package's Markov task (V = 16, S = 8, order 2, 32 training sequences), full-batch Adam;
μP (zero-initialized queries) sweeps η over 2^{-3}..2^{5}, standard practice over
2^{-12}..2^{-4}.  ``sgd`` (widths 256–4096, and the limit): one block (2 heads, tanh) on
V = 8, S = 4, 8 training sequences, full-batch SGD; μP over 2^{-3}..2^{5} with its
infinite-width limit as the last width (4096 particles, ``--seeds`` replicates),
standard practice over 2^{-8}..2^{0}.  The cost is the training loss after ``--steps``
steps, nine rates each.  Reported per parametrization and width: η* with its 95 %
interval (seeds − 1 degrees of freedom), the loss at the best grid rate, and the fitted
drift exponent k of η* ∝ n^k over the finite widths.  Each parametrization's rows go to
the JSON file when it finishes (a temporary file renamed into place).
"""
import argparse

import numpy as np

import tp_limits as tp
from tp_limits.engine.atomic import write_json
from tp_limits.transformer import Transformer, markov_task, transformer_lr_sweep

#: optimizer -> parametrization -> (model fields, log2 rate range)
SETUPS = {"adam": {"μP, 1/d": (dict(param="mup", attention="1/d", zero_query=True), (-3, 5)),
                   "SP, 1/sqrt(d)": (dict(param="sp", attention="1/sqrt(d)"), (-12, -4))},
          "sgd": {"μP, 1/d": (dict(param="mup", attention="1/d", zero_query=True), (-3, 5)),
                  "SP, 1/sqrt(d)": (dict(param="sp", attention="1/sqrt(d)"), (-8, 0))}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    ap.add_argument("--widths", default=None)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    adam = args.optimizer == "adam"
    widths = [int(w) for w in (args.widths or ("128,256,512,1024" if adam else
                                               "256,512,1024,2048,4096")).split(",")]
    seeds, steps, particles = args.seeds, args.steps, 4096
    if args.quick:
        widths, seeds, steps, particles = [32, 64], 2, 3, 256
    if adam:
        task, shape, phi = markov_task(vocab=16, seq_len=8, order=2, n_train=32,
                                       n_eval=16), (16, 8), "relu"
    else:
        task, shape, phi = markov_task(vocab=8, seq_len=4, order=2, n_train=8,
                                       n_eval=4), (8, 4), "tanh"
    optimizer = tp.Adam() if adam else tp.SGD()
    rows = {}
    print("| parametrization | n | η* | 95 % interval | loss at the best grid rate |")
    print("|---|---|---|---|---|")
    for name, (kw, (lo, hi)) in SETUPS[args.optimizer].items():
        model = Transformer(*shape, heads=2, phi=phi, **kw)
        lrs = 2.0 ** np.arange(lo, hi + 1)
        with_limit = not adam and kw["param"] == "mup"
        sweep = transformer_lr_sweep(model, task, widths, lrs, optimizer, steps=steps,
                                     seeds=seeds, limit=with_limit, particles=particles)
        mean = sweep.costs.mean(axis=2)
        for i, (n, o) in enumerate(sweep.optima.items()):
            print(f"| {name} | {'∞' if n == float('inf') else n} | {o.lr:.3g} | [{o.low:.3g}, {o.high:.3g}] | "
                  f"{np.min(mean[i]):.4f} |")
        k, half = sweep.drift()
        print(f"| {name} | drift k of η* ∝ n^k | {k:+.2f} ± {half:.2f} | | |")
        rows[name] = {"widths": [str(n) for n in sweep.widths], "lrs": list(lrs),
                      "costs": sweep.costs.tolist(), "drift": [k, half],
                      "optima": {str(n): o.triple for n, o in sweep.optima.items()}}
        out = args.json or f"transformer_lr_transfer_{args.optimizer}.json"
        write_json(out, rows)
        if sweep.interrupted:
            print("interrupted: the table holds the widths that finished")
            break


if __name__ == "__main__":
    main()
