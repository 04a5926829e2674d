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
import itertools

import numpy as np

import tp_limits as tp

import convergence_table

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


COLUMNS = (("norm", "norm"), ("φ", "phi"), ("L", "L"), ("optimizer", "optimizer"),
           ("architecture", "arch"))


if __name__ == "__main__":
    convergence_table.main(configurations, COLUMNS, "norm_convergence.json")
