"""Cost of the toy network's fine-tuning step (adapters/engine.py) at N particles (the
limit) or width N: against the plain matrix form of the same network and against the
memory traffic of a step.

    python benchmarks/bench_adapters.py [--particles 4096,16384,65536] [--inputs 256]
                                        [--steps 20]

Rows: seconds per Adam step of ``fine_tune`` (Z_A⁰ given, so no kernel quadrature); *plain*:
the same step written on the matrices (A ∈ ℝ^{r×N}, B ∈ ℝ^{N×r}, ``@`` and ``np.tanh``) as a
ratio to it; *floor*: the step's unavoidable traffic — h read three times, v, φ(v) and φ′
written and read, 7·N·X·8 bytes — at the speed of a large NumPy copy timed here.  Also the
input kernel's quadrature (tanh, Gauss–Hermite 96 × 96) for X inputs, paid once per sweep.

    python benchmarks/bench_adapters.py --pretrained [--particles 16384,131072]
                                        [--L 2] [--layer hidden | readout | input | W<l>]

A pretrained network (μP, L = 2, tanh, 20 SGD steps of batch 8; docs/theory.md §16.6): the
seconds of phase one in the limit (the deep Monte Carlo run and the forward pass of the X
fine-tuning inputs, ``pretrain``) against one phase-two step on the same particles (the
mean over ``--steps``: below W^L a step's cost grows with the frozen layers' histories),
as the number of fine-tuning steps that cost as much.
"""
import argparse
import math
import time

import numpy as np

from bench_tasks import copy_bandwidth
from tp_limits.adapters.engine import fine_tune
from tp_limits.adapters.toy import LoRAToy, input_kernel, sine_task


def plain(toy, task, N, steps, rng):
    """The network as matrices, Adam on A and B: the reference the engine's step is timed
    against."""
    w = rng.standard_normal((N, toy.d)) / math.sqrt(toy.d)
    h = np.tanh(w @ task.x.T)
    w_out = rng.standard_normal(N) / N
    A = rng.standard_normal((toy.rank, N)) / math.sqrt(N)
    B = np.zeros((N, toy.rank))
    mA, vA, mB, vB = (np.zeros_like(A), np.zeros_like(A), np.zeros_like(B), np.zeros_like(B))
    y, tr = task.y, task.train
    lr_A, lr_B = 16.0 / N, 1 / 16
    t0 = time.perf_counter()
    for t in range(1, steps + 1):
        za = A @ h
        v = B @ za
        f = w_out @ np.tanh(v)
        chi = (f[tr] - y[tr]) / task.n_train
        dv = w_out[:, None] * (1 - np.tanh(v[:, tr]) ** 2) * chi
        gB, gA = dv @ za[:, tr].T, (B.T @ dv) @ h[:, tr].T
        for g, x, m, s, lr, eps in ((gA, A, mA, vA, lr_A, 1e-8), (gB, B, mB, vB, lr_B, 1e-8 / N)):
            m[:] = 0.9 * m + 0.1 * g
            s[:] = 0.999 * s + 0.001 * g * g
            x -= lr * (m / (1 - 0.9 ** t)) / (np.sqrt(s / (1 - 0.999 ** t)) + eps)
    return (time.perf_counter() - t0) / steps


def pretrained(a):
    """Phase one's time against a phase-two step's, on the same particles."""
    import tp_limits as tp
    from tp_limits.adapters import PretrainedLoRA, pretrain
    rng = np.random.default_rng(0)
    X = rng.standard_normal((160, 5))
    r = tp.Routine(X, np.sin(2 * X[:, 0]), lr=0.5, batch_size=8, eval_inputs=X[:8])
    pre = PretrainedLoRA(net=tp.MLP(tp.mup(a.L), 5, 1, phi="tanh"), routine=r, layer=a.layer)
    task = sine_task(n_train=a.inputs // 2, n_test=a.inputs - a.inputs // 2)
    print(f"L = {a.L}, adapter on {a.layer}, {len(task.y)} inputs, {a.steps} steps")
    print("| N | phase one (s) | phase-two step (s) | steps that cost phase one |")
    print("|---|---|---|---|")
    for N in (int(n) for n in a.particles.split(",")):
        t0 = time.perf_counter()
        base = pretrain(pre, task.x, math.inf, seed=0, particles=N)
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        fine_tune(pre, task, math.inf, 1.0, 0.05, steps=a.steps, seeds=1, frozen=base)
        step = (time.perf_counter() - t0) / a.steps
        print(f"| {N} | {one:.2f} | {step:.4f} | {one / step:.0f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--particles", default="4096,16384,65536")
    ap.add_argument("--inputs", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--pretrained", action="store_true")
    ap.add_argument("--L", type=int, default=2, help="--pretrained: hidden layers")
    ap.add_argument("--layer", default="hidden", help="--pretrained: the adapted matrix")
    a = ap.parse_args()
    if a.pretrained:
        return pretrained(a)
    toy = LoRAToy()
    task = sine_task(n_train=a.inputs // 2, n_test=a.inputs - a.inputs // 2)
    X = len(task.y)
    bw = copy_bandwidth()
    t0 = time.perf_counter()
    input_kernel(toy, task.x)
    print(f"input kernel (tanh, {X} inputs): {time.perf_counter() - t0:.2f} s")
    print("| N | s/step | plain / engine | engine / floor |")
    print("|---|---|---|---|")
    for N in (int(n) for n in a.particles.split(",")):
        za0 = np.zeros((toy.rank, X)) + 0.5
        fine_tune(toy, task, math.inf, 16.0, 1 / 16, steps=2, seeds=1, particles=N,
                  z_a0=za0)                                  # warm-up: first-touch pages
        t0 = time.perf_counter()
        fine_tune(toy, task, math.inf, 16.0, 1 / 16, steps=a.steps, seeds=1, particles=N,
                  z_a0=za0)
        engine = (time.perf_counter() - t0) / a.steps
        ref = plain(toy, task, N, a.steps, np.random.default_rng(0))
        floor = 7 * N * X * 8 / bw
        print(f"| {N} | {engine:.4f} | {ref / engine:.2f} | {engine / floor:.1f} |")


if __name__ == "__main__":
    main()
