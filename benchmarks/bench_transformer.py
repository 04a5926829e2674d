"""Cost of a transformer's training step at width n and in the limit (tp_limits/transformer).

    python benchmarks/bench_transformer.py [--widths 512,1024,2048] [--particles 4096,16384,65536]
                                           [--steps 10]

The problem is studies/transformer_convergence.py's (V = 8, S = 4, one block, 2 heads, tanh,
SGD; 4 training and 2 evaluation sequences, 16 + 8 rows a step).

*Finite*: seconds per step (forward of the training and evaluation sequences, backward,
update; initialization excluded), and the ratio to a floor measured in the same run: with
16 rows the step is dominated by passes over the six n × n matrices — the gradient written,
then read with W and W written back — 3 · 6 · n² · 8 bytes at the speed of a large NumPy
copy (read + write).

*Limit*: seconds per step of one replicate at N particles (BLAS on one thread, as the
engine runs), the first step's and the last's: each step adds 16 rows to every matrix's
two hat families, and a product costs O(N k m) over the k stored rows, so the last step
over the first grows with the steps (the deep limit's T² in all).

*Tangent kernel* (``--kernel-widths``): seconds of one network's tangent kernel
K_vv'(a, b) on the 4 training sequences (R = 16 rows, all V = 8 words) against the
training step's in the same run: one backward pass over R·V sequences of S rows, so about
V·S = 32 training backward passes' work, plus the Grams of its R·V·S rows.
"""
import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from tp_limits.transformer import Transformer, empirical_transformer_ntk, markov_task
from tp_limits.engine.backend import numpy_backend
from tp_limits.limit.sampling import Draws
from tp_limits.transformer.limit import TransformerLimit
from tp_limits.transformer.particles import ParticleSpace
from tp_limits.transformer.network import backward, forward, init_params
from tp_limits.transformer.train import Stepper, loss_and_gradient
from tp_limits import SGD

from bench_tasks import copy_bandwidth


def finite_step(model, task, n, steps):
    params = init_params(model, n, np.random.default_rng(0))
    stepper = Stepper(model, SGD(), 0.5, n, params)
    t0 = time.perf_counter()
    for t in range(1, steps + 1):
        fw = forward(model, params, task.tokens)
        _, df = loss_and_gradient(model, fw.f, task.targets)
        stepper.step(params, backward(model, params, fw, df), t)
        forward(model, params, task.eval_tokens)
    return (time.perf_counter() - t0) / steps


def limit_steps(model, task, N, steps):
    draws = Draws(numpy_backend(), np.random.default_rng(0))
    run = TransformerLimit(model, task, 0.5, ParticleSpace(N, draws, steps * task.tokens.size))
    both = np.concatenate([task.tokens, task.eval_tokens])
    times = []
    with threadpool_limits(limits=1, user_api="blas"):
        for t in range(1, steps + 1):
            t0 = time.perf_counter()
            f, caches = run.forward(both, task.tokens.size, t)
            run.step(f, caches, t)
            times.append(time.perf_counter() - t0)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="512,1024,2048")
    ap.add_argument("--particles", default="4096,16384,65536")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--kernel-widths", default="1024,2048,4096")
    a = ap.parse_args()
    task = markov_task(vocab=8, seq_len=4, n_train=4, n_eval=2, seed=1)
    model = Transformer(8, 4, heads=2, phi="tanh")
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e9:.1f} GB/s\n")
    print("| n | s/step | engine / floor |\n|---|---|---|")
    for n in (int(w) for w in a.widths.split(",")):
        s = finite_step(model, task, n, a.steps)
        print(f"| {n} | {s:.4f} | {s / (3 * 6 * n * n * 8 / bw):.1f} |", flush=True)
    print("\n| N | first step (s) | last step (s) | mean (s/step) |\n|---|---|---|---|")
    for N in (int(p) for p in a.particles.split(",")):
        times = limit_steps(model, task, N, a.steps)
        print(f"| {N} | {times[0]:.4f} | {times[-1]:.4f} | {np.mean(times):.4f} |", flush=True)
    print("\n| n | kernel (s) | kernel / training step |\n|---|---|---|")
    for n in (int(w) for w in a.kernel_widths.split(",")):
        step = finite_step(model, task, n, 3)
        t0 = time.perf_counter()
        empirical_transformer_ntk(model, task.tokens, n)
        s = time.perf_counter() - t0
        print(f"| {n} | {s:.2f} | {s / step:.0f} |", flush=True)


if __name__ == "__main__":
    main()
