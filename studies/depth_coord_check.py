"""Coordinate checks across depth: the width-512 network's one-step changes against the
depth exponents predicted for its rule (docs/results.md, "Coordinate checks across
depth").

    python studies/depth_coord_check.py [--quick]

tanh μP with residual blocks (L = 3 base), width 512, 4 seeds, K = 4, 8, 16, 32, 64
blocks, exponents fitted over the three largest K (16…64); one SGD step of batch 2 on
y = tanh(x_1 − x_2) (η = 0.1; Adam: η = 0.01), the task of tests/test_residual.py and
notebook 11.  Each cell: the fitted exponent of K and, in brackets, the prediction.
``--quick`` runs K = 4, 8 at width 64 with 2 seeds.
"""
import argparse

import numpy as np

import tp_limits as tp

ROWS = (("Depth-μP, SGD (α = ½, γ = 0)", tp.Residual.depth_mup("sgd"), "sgd"),
        ("α = ½, γ = −1, SGD", tp.Residual(0.5, -1.0), "sgd"),
        ("α = 1, γ = 0, SGD", tp.Residual(1.0, 0.0), "sgd"),
        ("Depth-μP, Adam (α = ½, γ = ½)", tp.Residual.depth_mup("adam"), "adam"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    depths, width, seeds = ([4, 8], 64, 2) if args.quick else ([4, 8, 16, 32, 64], 512, 4)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 3)) / np.sqrt(3)
    print("| rule | block update | feature change | output change |")
    print("|---|---|---|---|")
    for name, res, opt in ROWS:
        adam = opt == "adam"
        r = tp.Routine(X, np.tanh(X[:, :1] - X[:, 1:2]), lr=0.01 if adam else 0.1,
                       batch_size=2, eval_inputs=X[:4], optimizer=tp.Adam() if adam else None)
        net = tp.MLP(tp.mup(3, optimizer=opt), 3, 1, phi="tanh", residual=res)
        dc = tp.depth_check(net, r, depths, width=width, seeds=seeds, executor="serial")
        cells = [f"{dc.slopes[q][0]:+.2f} ({dc.predicted[q]:+g})"
                 for q in ("block update", "feature change", "output change")]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
