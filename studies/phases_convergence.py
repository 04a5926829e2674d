"""Pretrain, then fine-tune some layers: finite networks against their infinite-width limit
in phases (docs/theory.md §10.10).

    python studies/phases_convergence.py [--widths 256,512,1024,2048,4096,8192] [--seeds 8]
                                         [--particles 32768] [--replicates 8]
                                         [--json phases_convergence.json] [--quick]

Phase one trains every layer of a μP MLP (L = 2, d = 3, d_out = 2) for 3 steps on one task
(tests/conftest.py's N8_LONG batches); phase two trains only the layers ``train`` for 3
steps on a second task (6 Gaussian inputs, targets sin(Σx), cos(2x₁)).  Configurations: φ
(tanh, relu) × optimizer (SGD with momentum 0.5 at η = 0.5, 0.4; Adam at η = 0.03, 0.1)
× fine-tuned layers (the readout W3; W2 and W3; the hidden W2; and every layer, the
control without a frozen one).  Each is run by studies/convergence_table.py: the Monte
Carlo limit and ``--seeds`` finite networks per width, with the exponent of the rms
distance to the limit, the rms at the widest width and the largest gap there in combined
standard errors.
"""
import itertools

import numpy as np

import tp_limits as tp

import convergence_table

X1 = np.array([[1, 0, 0], [0, 1, 0], [0.5, 0.5, 0.5], [1, -1, 0], [0, 0, 1], [1, 1, 0]], float)
Y1 = np.array([[1, 0], [0, -1], [0.5, 0.5], [1, 0], [0, 1], [-0.5, 0.5]], float)
EVAL = np.array([[1, 1, 1], [0, 0, 1]], float)
TRAINED = {"W3": ("W3",), "W2+W3": ("W2", "W3"), "W2": ("W2",), "all (control)": None}


def second_task():
    rng = np.random.default_rng(3)
    X2 = rng.standard_normal((6, 3)) / np.sqrt(3)
    return X2, np.column_stack([np.sin(X2.sum(axis=1)), np.cos(2 * X2[:, 0])])


def configurations():
    X2, Y2 = second_task()
    for phi, opt, trained in itertools.product(("tanh", "relu"), ("sgd", "adam"), TRAINED):
        adam = opt == "adam"
        optimizer = tp.Adam() if adam else tp.SGD(momentum=0.5)
        lr1, lr2 = (0.03, 0.1) if adam else (0.5, 0.4)
        net = tp.MLP(tp.mup(2, optimizer=opt), 3, 2, phi=phi)
        routine = tp.Routine.phases(
            tp.Routine(X1, Y1, lr=lr1, batch_size=2, optimizer=optimizer),
            tp.Routine(X2, Y2, lr=lr2, batch_size=2, optimizer=optimizer,
                       train=TRAINED[trained], eval_inputs=EVAL))
        yield dict(phi=phi, optimizer=opt, trained=trained), net, routine


COLUMNS = (("φ", "phi"), ("optimizer", "optimizer"), ("fine-tuned", "trained"))


if __name__ == "__main__":
    convergence_table.main(configurations, COLUMNS, "phases_convergence.json")
