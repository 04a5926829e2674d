"""The one-hidden-layer limit's time estimate: a measured cost model (docs/performance.md,
"Time estimates").

One replicate of N particles and T steps through the fused sweep (the host's 'numba'
kernel) costs, in units whose prices ``COST`` were fitted to measured runs on the
two-core machine of docs/performance.md (benchmarks/bench_cost_model.py --one-hidden
--fit):

* mac = N T (2B + E)(d + d_out): per particle, the multiply-adds of the batch's
  pre-activations and the update of Z^U and Z^{nV} (B inputs), and of the forward sums of
  the next batch and the evaluation inputs (B + E);
* phi = N T (B + E): the evaluations of a φ that costs one (tanh, gelu, ...; a piecewise
  linear φ — relu, id — is a comparison, priced with the multiply-adds);
* pass = N T (d + d_out): each sweep's read and write of the particles;
* state = N T (d + d_out) S: an optimizer's S state arrays per coordinate (momentum 1,
  Adam 2), read and written every sweep;
* stats = N T E (d + 1): ``record`` 'stats' — the evaluation pre-activations of Z^U_0
  as well;
* call = T: each sweep's launch and the step's bookkeeping, whatever N.

The compile of a φ and update rule's first sweep is not part of the estimate (it is paid
once per machine, and announced while it runs).
"""
from __future__ import annotations

import numpy as np

#: seconds per unit of each term of :func:`cost_units` (the 'numba' kernel, float64)
COST = (1.46e-10, 5.78e-9, 3.04e-9, 1.79e-9, 2.90e-9, 1.08e-3)
NAMES = ("mac", "phi", "pass", "state", "stats", "call")


def cost_units(problem, particles: int, stats: bool) -> tuple:
    """The terms of one replicate's cost, in the order of ``NAMES``."""
    net, T, B, E = problem.net, problem.T, problem.B, problem.E
    d, do, N = net.d_in, net.d_out, float(particles)
    slots = len(problem.optimizer.rule.slots)
    passes = N * T * (d + do)
    return (N * T * (2 * B + E) * (d + do),
            0.0 if net.nonlinearity.piecewise_linear else N * T * (B + E),
            passes, passes * slots, N * T * E * (d + 1) if stats else 0.0, float(T))


def time_estimate(problem, particles: int, stats: bool, replicates: int,
                  workers: int) -> float:
    """Seconds the run should take: the replicates one after another in rounds of
    ``workers``, each priced by :func:`cost_units`."""
    rounds = -(-replicates // max(workers, 1))
    return rounds * float(np.dot(cost_units(problem, particles, stats), COST))
