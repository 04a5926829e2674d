"""The bias of the Muon limit's Monte Carlo coefficients (docs/theory.md §11.4).

The core K̂ of a hidden matrix's msign is a nonlinear function of Gram matrices that the
Monte Carlo engine estimates from its particles, so E[f̂] differs from the limit.  This
script measures that difference against the exact linear engine (μP-Muon, φ = id, d = 3,
d_out = 2, B = 2, η = 0.05, the three N8 batches of the tests) or, for φ = tanh, against a
run with many more particles:

    python studies/muon_bias.py spectrum            # the buffer's singular values
    python studies/muon_bias.py small [--L 2]       # plain Monte Carlo, N = 64…4096
    python studies/muon_bias.py steps               # Newton–Schulz steps 1, 2, 3, 5
    python studies/muon_bias.py default [--runs 400] [--sampler qmc] [--phi id]

``small`` and ``steps`` run R replicates of N particles with plain Monte Carlo draws and
report the RMS (over steps, inputs and outputs) of the replicates' mean minus the exact
value, with that mean's standard error, beside one replicate's standard error.
``default`` repeats simulate_limit's default run (N = 10⁵ particles × 8 replicates, the
default sampler) with independent seeds and sets the bias beside the standard error the
run reports (7 degrees of freedom).
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

import tp_limits as tp
import tp_limits.spec.optimizers.transforms as msign_numerics

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import N8_LONG  # noqa: E402


def problem(opt, L=2, phi="id"):
    net = tp.MLP(tp.mup(L, optimizer=opt.exponents), 3, 2, phi=phi)
    return net, tp.Routine(lr=0.05, optimizer=opt, **N8_LONG)


def rms(a):
    return float(np.sqrt(np.mean(np.square(a))))


def spectrum(_args):
    """The singular values of each step's buffer D/‖D‖_F in the exact limit (L = 2)."""
    seen = []
    core = msign_numerics.newton_schulz_core

    def spy(C, GP, GQ, steps, scale=1.0, xp=np):
        def root(G):
            w, U = np.linalg.eigh((G + G.T) / 2)
            return (U * np.sqrt(np.clip(w, 0.0, None))) @ U.T
        sv = np.linalg.svd(root(GP) @ C @ root(GQ), compute_uv=False)
        seen.append(sv / np.sqrt(np.sum(sv ** 2)))
        return core(C, GP, GQ, steps, scale, xp)

    msign_numerics.newton_schulz_core = spy
    try:
        tp.simulate_limit(*problem(tp.Muon()))
    finally:
        msign_numerics.newton_schulz_core = core
    a, b, c = msign_numerics.NS_COEFFS
    print(f"Newton–Schulz: p(x) = {a} x {b:+} x³ {c:+} x⁵; five steps multiply a small "
          f"singular value by {a ** 5:.0f}")
    for t, sv in enumerate(seen):
        print(f"update {t}: σ/‖D‖_F = " + ", ".join(f"{s:.2e}" for s in sv))


def replicate_bias(net, r, exact, N, R, seed=7):
    t0 = time.perf_counter()
    mc = tp.simulate_limit(net, r, method="monte_carlo", particles=N, replicates=R,
                           sampler="mc", seed=seed)
    b, se = mc.f_eval[1:] - exact.f_eval[1:], mc.f_eval_se[1:]
    one = rms(se * np.sqrt(R))
    return (f"| {N} | {R} | {rms(b):.2g} ± {rms(se):.1g} | {one:.2g} | {rms(b) / one:.2f} | "
            f"{time.perf_counter() - t0:.0f} s |")


HEAD = ("| N | R | bias ± its SE | one replicate's SE | bias / that SE | time |\n"
        "|---|---|---|---|---|---|")


def small(args):
    grid = ((64, 4000), (256, 4000), (1024, 2000), (4096, 1000))
    for name, opt in (("Newton–Schulz, 5 steps", tp.Muon()), ("exact polar", tp.Muon(ns_steps=None)),
                      ("SGD, momentum 0.9", tp.SGD(momentum=0.9))):
        net, r = problem(opt, args.L)
        exact = tp.simulate_limit(net, r)
        print(f"\nL = {args.L}, {name}\n{HEAD}")
        for N, R in grid:
            print(replicate_bias(net, r, exact, N, R), flush=True)


def steps(args):
    for k in (1, 2, 3, 5):
        net, r = problem(tp.Muon(ns_steps=k), args.L)
        exact = tp.simulate_limit(net, r)
        print(f"\nL = {args.L}, {k} Newton–Schulz steps\n{HEAD}")
        for N, R in ((256, 2000), (1024, 2000), (4096, 1000)):
            print(replicate_bias(net, r, exact, N, R), flush=True)


def default(args):
    """Independent default runs: their mean minus the reference, against the reported SE."""
    net, r = problem(tp.Muon(), args.L, args.phi)
    t0 = time.perf_counter()
    if args.phi == "id":
        ref, ref_se = tp.simulate_limit(net, r).f_eval[1:], 0.0
        what = "the exact linear engine"
    else:
        refs = [tp.simulate_limit(net, r, particles=args.ref_particles, seed=90_000 + s,
                                  sampler=args.sampler) for s in range(args.ref_runs)]
        ref = np.mean([x.f_eval[1:] for x in refs], axis=0)
        ref_se = np.sqrt(np.mean([x.f_eval_se[1:] ** 2 for x in refs], axis=0) / args.ref_runs)
        what = f"{args.ref_runs} runs of {args.ref_particles} particles × 8"
    f, se = [], []
    for s in range(args.runs):
        run = tp.simulate_limit(net, r, particles=100_000, seed=args.seed + s,
                                sampler=args.sampler)
        f.append(run.f_eval[1:])
        se.append(run.f_eval_se[1:])
    f, se = np.array(f), np.array(se)
    bias = f.mean(axis=0) - ref
    bias_se = np.sqrt(f.var(axis=0, ddof=1) / args.runs + np.square(ref_se))
    reported = np.sqrt(np.mean(se ** 2, axis=0))
    print(f"φ = {args.phi}, L = {args.L}, sampler {args.sampler}: {args.runs} runs of "
          f"10⁵ particles × 8 replicates against {what} ({time.perf_counter() - t0:.0f} s)")
    print(f"RMS bias {rms(bias):.2g} ± {rms(bias_se):.2g}; reported SE {rms(reported):.2g} "
          f"(the runs' spread {rms(f.std(axis=0, ddof=1)):.2g})")
    print(f"bias / reported SE: RMS {rms(bias / reported):.3f} ± {rms(bias_se / reported):.3f},"
          f" largest |entry| {np.max(np.abs(bias / reported)):.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("spectrum", "small", "steps", "default"))
    ap.add_argument("--L", type=int, default=2)
    ap.add_argument("--phi", default="id")
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--sampler", default=None)
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--ref-particles", type=int, default=2 ** 21)
    ap.add_argument("--ref-runs", type=int, default=4)
    args = ap.parse_args()
    {"spectrum": spectrum, "small": small, "steps": steps, "default": default}[args.what](args)


if __name__ == "__main__":
    main()
