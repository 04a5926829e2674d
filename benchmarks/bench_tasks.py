"""Cost per step of Word2Vec's CBOW step (tasks/word2vec.py) at width n and in the exact
limit (m = V columns): the fused kernel against its NumPy twin and against the memory
traffic a step cannot avoid.

    python benchmarks/bench_tasks.py [--vocab 5000] [--widths 256,1024] [--steps 40]

On the first ``--steps`` batches of gensim's Wikipedia excerpt (window 5, 5 negatives,
batches of 256; needs ``pip install -e ".[text]"``), each row gives seconds per step and
the ratio to a bandwidth floor measured in the same run: a step must read the rows of the
distinct context words and of the distinct output words (target and negatives) and write
both back, (2·|context words| + 2·|output words|)·m·8 bytes; the floor is that many bytes
at the speed of a large NumPy copy (read + write) timed here.  The limit's row is the
same code with m = V: its time over the width-n time should be about V/n.  *twin*: the
NumPy/SciPy form of the same step (cbow_step_numpy), as a ratio to the kernel.
"""
import argparse
import itertools
import math
import time

import numpy as np

import tp_limits as tp
from tp_limits.tasks import CBOWStream, Vocabulary, cbow_network
from tp_limits.tasks.pair import initial, rates
from tp_limits.tasks.word2vec import cbow_step, cbow_step_numpy


def copy_bandwidth(nbytes=400_000_000, repeats=5):
    """Bytes per second of a large array copy (each byte read once and written once)."""
    a = np.ones(nbytes // 8)
    b = np.empty_like(a)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=5000)
    ap.add_argument("--widths", default="256,1024")
    ap.add_argument("--steps", type=int, default=40)
    a = ap.parse_args()
    tokens = tp.datasets.wiki_excerpt()
    vocab = Vocabulary.build(tokens, a.vocab)
    stream = CBOWStream.of(vocab, tokens, window=5, negatives=5, batch_size=256, seed=0)
    batches = list(itertools.islice(stream.batches(), a.steps))
    rows_touched = np.mean([2 * len(np.unique(b.context[b.context >= 0]))
                            + 2 * len(np.unique(np.concatenate([b.target, b.negatives.ravel()])))
                            for b in batches])
    bw = copy_bandwidth()
    net = cbow_network(tp.mup(1), a.vocab)
    print(f"V = {a.vocab}, {a.steps} steps of 256 examples, {rows_touched:.0f} row reads and "
          f"writes per step; copy bandwidth {bw / 1e9:.1f} GB/s\n"
          "| width | m | s/step | floor s/step | ratio to floor | twin / kernel | "
          "vs first width |\n|---|---|---|---|---|---|---|")
    first = None
    for width in [int(w) for w in a.widths.split(",")] + [math.inf]:
        lr_in, lr_out, alpha = rates(net, width, 1.0)
        per = {}
        for step in (cbow_step, cbow_step_numpy):
            E_in, E_out, _ = initial(net, width, seed=0)
            step(E_in, E_out, batches[0], lr_in, lr_out, alpha)        # compile, warm caches
            t0 = time.perf_counter()
            for t, b in enumerate(batches):
                step(E_in, E_out, b, lr_in, lr_out, alpha, t)
            per[step] = (time.perf_counter() - t0) / len(batches)
        m = E_in.shape[1]
        floor = rows_touched * m * 8 / bw
        k = per[cbow_step]
        first = first or k
        print(f"| {'∞' if width == math.inf else width} | {m} | {k:.4f} | {floor:.4f} | "
              f"{k / floor:.1f} | {per[cbow_step_numpy] / k:.1f} | {k / first:.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
