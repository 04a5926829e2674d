"""The Numba kernels against NumPy: vectorizable tanh, every φ of the kernel, and the fused
sweep vs its twin.

The whole sweep is compiled once per φ (20-40 s each on a cold cache), so the sweep
tests take one φ of each kind the kernel treats differently — id and relu (piecewise
linear: φ fused with the readout sum), tanh (the branch-free vector tanh), gelu (scalar
libm calls) — and every φ's formulas are checked on their own against the NumPy
nonlinearities, through the same ``phi_arrays`` and ``phi_times`` the sweep calls."""
import numba
import numpy as np
import pytest
from numba import njit

import tp_limits as tp
from tp_limits.elementwise import fast_tanh
from tp_limits.limit.fused.blocks import BLAS_MIN_B, BLAS_MIN_D, block_of
from tp_limits.limit.fused.columns import n_columns
from tp_limits.limit.fused.contract import SweepData, sweep_args
from tp_limits.limit.fused.phi import (
    cache_planes,
    dphi_of_value,
    phi_arrays,
    phi_dphi,
    phi_tag,
    phi_times,
)
from tp_limits.limit.fused.sweep import FUSE_MAX_B, UPDATE_CHUNK, sweep
from tp_limits.limit.fused.sweep_numpy import sweep_numpy
from tp_limits.nonlinearities import NONLINEARITIES


@njit(fastmath=True, error_model="numpy")
def _tanh_loop(x, out):
    for i in range(x.shape[0]):
        out[i] = fast_tanh(x[i])


def test_fast_tanh_within_4_ulp():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-25, 25, 200_000), np.logspace(-300, 1.5, 20_000),
                        -np.logspace(-300, 1.5, 20_000), rng.uniform(-1e-3, 1e-3, 20_000),
                        [0.0, -0.0, 19.9, 20.0, 1e308, -1e308]])
    out = np.empty_like(x)
    _tanh_loop(x, out)
    ref = np.tanh(x)
    ulp = np.abs(out - ref) / np.spacing(np.abs(ref)).clip(min=np.finfo(float).tiny)
    assert ulp.max() <= 4


PLAIN = tp.SGD()


def _args(U, V, w, U0, phi, Xb, chi, su, sv, Xn, Xe, stats, block, opt=PLAIN, t=1,
          shrinks=(0.0, 0.0), lrs=(1.0, 1.0), SU=None, SV=None, cache=None, cached=False):
    """The sweep's record; the optimizer's hyperparameters for its t-th update with the
    given shrinks and rates of Z^U and Z^{nV}; state arrays (k, rows, N) as the
    kernel's (k·rows, N)."""
    hu = opt.coordinate(lrs[0], 1.0, shrinks[0], t)[1]
    hv = opt.coordinate(lrs[1], 1.0, shrinks[1], t)[1]
    flat = lambda S: None if S is None else S.reshape(-1, S.shape[-1])  # noqa: E731
    data = SweepData(U, V, w, U0, Xb, chi, su, sv, Xn, Xe, stats, block, flat(SU), flat(SV),
                     cache, cached)
    return sweep_args(data, opt, hu, hv, phi)


def _out(N, block, Bn, E, do, stats):
    return np.zeros(((N + block - 1) // block, n_columns(Bn, E, do, stats)))


SWEEP_PHIS = ("gelu", "id", "relu", "tanh")


@njit(fastmath=True, error_model="numpy")
def _phi_loop(tag, h, P, D, G):
    phi_arrays(tag, h, P, D)
    phi_times(tag, h, P, G)         # the update's form: φ stored, G scaled by φ′


@pytest.mark.parametrize("phi", sorted(NONLINEARITIES))
def test_every_phi_of_the_kernel_matches_numpy(phi):
    from tp_limits.engine.backend import numpy_backend
    from tp_limits.nonlinearities import get_nonlinearity
    h = np.concatenate([np.linspace(-12, 12, 4001), [0.0, -0.0, 1e-300, 40.0, -40.0]])
    P, D, G = np.empty_like(h), np.empty_like(h), np.linspace(-2, 3, h.size)
    G0 = G.copy()
    _phi_loop(phi_tag(phi), h, P, D, G)
    nl, b = get_nonlinearity(phi), numpy_backend()
    assert np.allclose(P, nl.phi(h, b), rtol=1e-13, atol=1e-15)
    assert np.allclose(D, nl.dphi(h, b), rtol=1e-13, atol=1e-15)
    assert np.allclose(G, G0 * D, rtol=1e-15, atol=0.0)   # sigmoid: s(1 - s) may round apart


def _random_state(rng, d, do, N):
    U = rng.standard_normal((d, N))
    return U, rng.standard_normal((do, N)), U + 0.1 * rng.standard_normal((d, N))


@pytest.mark.parametrize("phi", SWEEP_PHIS)
@pytest.mark.parametrize("d, B, Bn, E, stats, weighted", [
    (3, 2, 2, 3, True, False), (1, 0, 1, 2, False, True), (3, 3, 0, 1, True, True),
    (2, 1, 1, 0, False, False), (6, 2, 1, 2, True, False), (5, 1, 2, 1, False, True),
    (BLAS_MIN_D, BLAS_MIN_B, 1, 2, True, False), (BLAS_MIN_D, 1, 2, 1, False, True)])
def test_sweep_matches_numpy_twin(phi, d, B, Bn, E, stats, weighted):
    """d >= BLAS_MIN_D exercises the gemm paths (the Z^U update too when B >= BLAS_MIN_B),
    smaller d the vectorized loops."""
    rng = np.random.default_rng(abs(hash((phi, d, B, Bn, E))) % 2**32)
    do, N, block = 2, 5003, 512
    U, V, U0 = _random_state(rng, d, do, N)
    w = rng.uniform(0, 2 / N, N) if weighted else np.full(1, 1 / N)
    Xb, chi = rng.standard_normal((B, d)), rng.standard_normal((B, do))
    Xn, Xe = rng.standard_normal((Bn, d)), rng.standard_normal((E, d))
    out = _out(N, block, Bn, E, do, stats)
    U1, V1, U2, V2 = U.copy(), V.copy(), U.copy(), V.copy()
    sweep(_args(U1, V1, w, U0, phi, Xb, chi, 0.3, 0.2, Xn, Xe, stats, block), out)
    ref = sweep_numpy(_args(U2, V2, w, U0, phi, Xb, chi, 0.3, 0.2, Xn, Xe, stats, block))
    assert np.allclose(U1, U2, rtol=1e-12, atol=1e-13)
    assert np.allclose(V1, V2, rtol=1e-12, atol=1e-13)
    assert out.shape == ref.shape and np.allclose(out, ref, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("B, weighted", [(1, False), (3, True)])
def test_chunked_update_moves_the_particles_as_the_whole_block_does(B, weighted):
    """Without the cache, plain SGD with B <= FUSE_MAX_B runs the update and the forward
    pass chunk by chunk when a block is wider than UPDATE_CHUNK.  Each particle goes
    through the same arithmetic either way, so the particles come out bit for bit
    equal to blocks of UPDATE_CHUNK (no chunking); the sums, grouped per block, agree
    to rounding and with the NumPy twin."""
    assert B <= FUSE_MAX_B
    rng = np.random.default_rng(B)
    d, do, N, E = 16, 1, 3 * UPDATE_CHUNK * 4 + 37, 4
    U, V, U0 = _random_state(rng, d, do, N)
    w = rng.uniform(0, 2 / N, N) if weighted else np.full(1, 1 / N)
    Xb, chi = rng.standard_normal((B, d)), rng.standard_normal((B, do))
    Xn, Xe = rng.standard_normal((B, d)), rng.standard_normal((E, d))
    args = (w, U0, "tanh", Xb, chi, 0.3, 0.2, Xn, Xe, False)
    runs = {}
    for block in (4 * UPDATE_CHUNK, UPDATE_CHUNK):
        u, v = U.copy(), V.copy()
        out = _out(N, block, B, E, do, False)
        sweep(_args(u, v, *args, block), out)
        runs[block] = (u, v, out.sum(axis=0))
    (u1, v1, s1), (u2, v2, s2) = runs.values()
    assert np.array_equal(u1, u2) and np.array_equal(v1, v2)
    assert not np.array_equal(u1, U)
    assert np.allclose(s1, s2, rtol=1e-12, atol=1e-15)
    ref = sweep_numpy(_args(U.copy(), V.copy(), w, U0, "tanh", Xb, chi, 0.3, 0.2, Xn, Xe,
                            False, UPDATE_CHUNK)).sum(axis=0)
    assert np.allclose(s1, ref, rtol=1e-11, atol=1e-13)


HEAVY = tp.SGD(momentum=0.9, weight_decay=0.1)
NESTEROV = tp.SGD(momentum=0.9, weight_decay=0.1, nesterov=True)
ADAM = tp.Adam(betas=(0.9, 0.99), eps=1e-3)
OPTIMIZERS = {"sgd": PLAIN, "heavy": HEAVY, "nesterov": NESTEROV, "adam": ADAM}
STATE = dict(shrinks=(0.05, 0.02), lrs=(0.1, 0.07))         # δ and η of Z^U, Z^{nV}


#: (φ, optimizer) pairs the tests compile with optimizer state: the sweep is compiled
#: (about 20 s on a cold cache) per φ and optimizer rule, and the rule's code does not
#: depend on φ, so the state is checked with tanh (heavy ball, Adam: φ alone in the
#: cache) and silu (Nesterov: φ and φ′ in the cache), plain SGD with every φ of SWEEP_PHIS
STATE_PAIRS = (("tanh", "heavy"), ("tanh", "adam"), ("silu", "nesterov"))


@pytest.mark.parametrize("phi, name", STATE_PAIRS)
@pytest.mark.parametrize("d, B, step_u", [(3, 2, 0.3), (2, 1, 0.0), (BLAS_MIN_D, BLAS_MIN_B, 0.3),
                                          (5, 5, 0.3)])
def test_optimizer_state_sweep_matches_numpy_twin(phi, name, d, B, step_u):
    """Heavy-ball or Nesterov buffers with decay (one slot), Adam's moments with
    decoupled decay (two): the kernel's in-place state update against the NumPy twin
    over three steps (so old state counts), each step from the same state (the twin
    takes the kernel's after each comparison: these random particles and batches, with
    |x| ≈ √d, drive unbounded φ far out, where the rounding of the two summation orders
    grows from step to step); step_u = 0 is a layer whose gradient updates vanish but
    which still decays."""
    opt = OPTIMIZERS[name]
    k = len(opt.rule.slots)
    rng = np.random.default_rng(d * 7 + B + 100 * k)
    do, N, block, Bn, E = 2, 3001, 512, 1, 2
    U, V, U0 = _random_state(rng, d, do, N)
    w = np.full(1, 1 / N)
    SU, SV = 0.1 * rng.standard_normal((k, d, N)), 0.1 * rng.standard_normal((k, do, N))
    if k == 2:
        SU[1], SV[1] = SU[1] ** 2, SV[1] ** 2               # second moments are >= 0
    states = [[U.copy(), V.copy(), SU.copy(), SV.copy()] for _ in range(2)]
    for t in range(1, 4):
        Xb, chi = rng.standard_normal((B, d)), rng.standard_normal((B, do))
        Xn, Xe = rng.standard_normal((Bn, d)), rng.standard_normal((E, d))
        out = _out(N, block, Bn, E, do, False)
        u, v, su, sv = states[0]
        sweep(_args(u, v, w, U0, phi, Xb, chi, step_u, 0.2, Xn, Xe, False, block, opt, t,
                    SU=su, SV=sv, **STATE), out)
        u2, v2, su2, sv2 = states[1]
        ref = sweep_numpy(_args(u2, v2, w, U0, phi, Xb, chi, step_u, 0.2, Xn, Xe, False,
                                block, opt, t, SU=su2, SV=sv2, **STATE))
        assert np.allclose(out, ref, rtol=1e-11, atol=1e-13)
        for a, b in zip(*states):
            assert np.allclose(a, b, rtol=1e-11, atol=1e-13)
            b[...] = a
    assert not np.allclose(states[0][0], U)          # the particles did move


CACHE_CASES = [(3, 2, 0, False, 2), (1, 1, 1, True, 2), (BLAS_MIN_D, BLAS_MIN_B, 2, False, 2),
               (5, 4, 0, True, 2), (2, 6, 0, False, 1), (3, 5, 1, True, 1)]


def _slots(name):
    return len(OPTIMIZERS[name].rule.slots)


#: each case of CACHE_CASES with every φ of SWEEP_PHIS under plain SGD (k = 0), else with
#: each pair of STATE_PAIRS whose rule has k state slots
CACHE_RUNS = [(phi, name, d, B, weighted, do) for d, B, k, weighted, do in CACHE_CASES
              for phi, name in ([(phi, "sgd") for phi in SWEEP_PHIS] if k == 0 else
                                [pair for pair in STATE_PAIRS if _slots(pair[1]) == k])]


@pytest.mark.parametrize("phi, name, d, B, weighted, do", CACHE_RUNS)
def test_phi_cache_gives_the_uncached_sweeps(phi, name, d, B, weighted, do):
    """Three steps where each sweep's forward pass keeps φ (and φ′ where it does not
    follow from φ) of the next batch and the next update reads them: the kernel with the
    cache, the kernel without it and the NumPy twin with it move the particles alike and
    give the same sums.  d_out = 1 takes the one-pass G = (χ Z^{nV}) φ′ of the φ kept
    alone, for four rows (B = 6: four and two) at a time and the rest."""
    k = _slots(name)
    rng = np.random.default_rng(d * 11 + B + 5 * k)
    N, block, E = 3001, 512, 2
    U, V, U0 = _random_state(rng, d, do, N)
    w = rng.uniform(0, 2 / N, N) if weighted else np.full(1, 1 / N)
    SU, SV = 0.1 * np.abs(rng.standard_normal((k, d, N))), 0.1 * np.abs(rng.standard_normal((k, do, N)))
    planes = cache_planes(phi)              # φ alone where φ′ follows from it
    runs = {name: [U.copy(), V.copy(), SU.copy(), SV.copy(), np.full((planes, B, N), np.nan)]
            for name in ("cached", "plain", "twin")}
    batches = [rng.standard_normal((B, d)) for _ in range(4)]
    Xe = rng.standard_normal((E, d))
    opt = OPTIMIZERS[name]
    for t in range(4):                  # t = 0: no update, the forward pass fills the cache
        Xb = batches[t - 1] if t else np.zeros((0, d))
        chi = rng.standard_normal((len(Xb), do))
        Xn = batches[t]
        outs = {}
        for name, (u, v, su, sv, cache) in runs.items():
            c = dict(cache=cache, cached=t > 0) if name != "plain" else {}
            a = _args(u, v, w, U0, phi, Xb, chi, 0.3, 0.2, Xn, Xe, False, block, opt,
                      max(t, 1), SU=su, SV=sv, **STATE, **c)
            if name == "twin":
                outs[name] = sweep_numpy(a)
                continue
            outs[name] = _out(N, block, B, E, do, False)
            sweep(a, outs[name])
        for name in ("plain", "twin"):
            assert np.allclose(outs["cached"], outs[name], rtol=1e-11, atol=1e-13)
    for name in ("plain", "twin"):
        for a, b in zip(runs["cached"][:4], runs[name][:4]):
            assert np.allclose(a, b, rtol=1e-11, atol=1e-13)
    assert np.allclose(runs["cached"][4], runs["twin"][4], rtol=1e-12, atol=1e-13)
    assert not np.allclose(runs["cached"][0], U)          # the particles did move


@njit(fastmath=True, error_model="numpy")
def _dphi_both_ways(tag, x):
    """(φ′(x) as phi_dphi computes it, φ′ recovered from the value φ(x))."""
    direct, recovered = np.empty_like(x), np.empty_like(x)
    for j in range(x.shape[0]):
        p, dp = phi_dphi(tag, x[j])
        direct[j] = dp
        recovered[j] = dphi_of_value(tag, p)
    return direct, recovered


@pytest.mark.parametrize("phi", sorted(NONLINEARITIES))
def test_phi_alone_in_the_cache_gives_the_same_derivative(phi):
    """Where the cache keeps φ alone, the update's φ′ recovered from the cached value is
    bit for bit the φ′ the uncached update computes; the other φ keep both planes."""
    x = np.concatenate([np.linspace(-8, 8, 4001), [0.0, -0.0, 1e-300, -1e-300, 30.0]])
    if cache_planes(phi) == 2:                 # φ′ is not a function of φ (silu: not monotone)
        assert phi in ("gelu", "erf", "softplus", "silu")
        return
    direct, recovered = _dphi_both_ways(phi_tag(phi), x)
    assert np.array_equal(direct, recovered)


def test_sweep_independent_of_thread_count():
    rng = np.random.default_rng(1)
    d, do, N, block = 2, 1, 40_000, 2048
    U, V, U0 = _random_state(rng, d, do, N)
    args = (np.full(1, 1 / N), U0, "tanh", rng.standard_normal((1, d)),
            rng.standard_normal((1, do)), 0.5, 0.5, rng.standard_normal((1, d)),
            rng.standard_normal((3, d)), True, block)
    outs = []
    saved = numba.get_num_threads()
    try:
        for threads in (1, numba.config.NUMBA_NUM_THREADS):    # the whole pool
            numba.set_num_threads(threads)
            u, v = U.copy(), V.copy()
            out = _out(N, block, 1, 3, do, True)
            sweep(_args(u, v, *args), out)
            outs.append((u, v, out.sum(axis=0)))
    finally:
        numba.set_num_threads(saved)
    for a, b in zip(outs[0], outs[1]):
        assert np.array_equal(a, b)


@njit
def _write_through_block(A, copy):
    rows, a, copied = block_of(A, 3, 4, copy)
    rows[1, a + 2] = 7.0            # column 3 + 2 of A, if the block is A itself
    return a, copied, rows.shape[1]


@pytest.mark.parametrize("dtype, copy, in_place", [(np.float64, False, True),
                                                   (np.float64, True, False),
                                                   (np.float32, False, False)])
def test_float64_blocks_are_worked_on_in_place(dtype, copy, in_place):
    """The sweep updates float64 particles where they lie (row slices at the block's
    offset); the gemm path (copy) and float32 storage get a float64 copy at offset 0."""
    A = np.zeros((2, 10), dtype)
    a, copied, width = _write_through_block(A, copy)
    assert (a, copied) == ((3, False) if in_place else (0, True))
    assert width == (10 if in_place else 4)
    assert (A[1, 5] == 7.0) == in_place and np.count_nonzero(A) == int(in_place)


def test_particles_not_in_rows_are_refused_before_compiling():
    """The register tiles read each coordinate's row of particles as contiguous vectors."""
    U = np.asfortranarray(np.zeros((2, 4)))
    with pytest.raises(TypeError, match="C-contiguous"):
        sweep(_args(U, np.zeros((1, 4)), np.ones(1), U, "id", np.zeros((0, 2)),
                    np.zeros((0, 1)), 0.0, 0.0, np.zeros((1, 2)), np.zeros((0, 2)), False, 4),
              np.zeros((1, 2)))


def test_mixed_storage_dtypes_are_refused():
    """Float64 arrays are worked on in place and float32 ones copied, at different block
    offsets: the sweep takes one storage dtype for all particle arrays."""
    U = np.zeros((2, 4))
    with pytest.raises(TypeError, match="one storage dtype"):
        sweep(_args(U, np.zeros((1, 4), np.float32), np.ones(1), U, "id", np.zeros((0, 2)),
                    np.zeros((0, 1)), 0.0, 0.0, np.zeros((1, 2)), np.zeros((0, 2)), False, 4),
              np.zeros((1, 2)))
