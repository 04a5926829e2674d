"""Deep feature-learning limit by Monte Carlo (Stein and tangent Ż): vs the exact engine,
each other, and finite networks."""
import numpy as np
import pytest
from conftest import D1, N8, agree, d1, differ, welch_dof, within_se

import tp_limits as tp


@pytest.mark.parametrize("zdot", ["stein", "tangent"])
@pytest.mark.parametrize("case", ["D1, L=2", "D1, L=3", "N8, L=2", "N8, L=3",
                                  "D1, L=2, decoupled"])
def test_monte_carlo_matches_exact_deep_linear(case, zdot):
    if "decoupled" in case and zdot == "tangent":
        pytest.skip("the decoupled limit has no Ż to estimate")
    backprop = "decoupled" if "decoupled" in case else "exact"
    if case.startswith("N8"):
        L = 3 if "L=3" in case else 2
        sigma = [1.3, 0.7, 1.2] if L == 2 else [1.3, 0.7, 0.9, 1.2]
        net = tp.MLP(tp.mup(L), 3, 2, phi="id", sigma=sigma)
        r = tp.Routine(lr=0.4 if L == 2 else 0.25, **N8)
    else:
        L = 3 if "L=3" in case else 2
        net, r = tp.MLP(tp.mup(L), 2, 1, phi="id"), tp.Routine(lr=0.5 if L == 2 else 0.25, **D1)
    exact = tp.simulate_limit(net, r, backprop=backprop)
    mc = tp.simulate_limit(net, r, method="monte_carlo", particles=2 ** 14, replicates=16,
                           seed=11, backprop=backprop, zdot=zdot)
    assert mc.meta["engine"] == "limit/deep_monte_carlo" and mc.se_dof == 15
    assert mc.meta["zdot"] == (zdot if backprop == "exact" else "none (decoupled)")
    within_se(mc.f_eval[1:], exact.f_eval[1:], mc.f_eval_se[1:], mc.se_dof)


@pytest.mark.parametrize("L, B", [(2, 1), (3, 1), (2, 2)])
def test_tangent_and_stein_estimators_agree_for_tanh(L, B):
    """Two different Ż estimators of the same limit: equal within their combined SE."""
    if B == 1:
        net, r = tp.MLP(tp.mup(L), 2, 1, phi="tanh"), tp.Routine(lr=0.5, **D1)
    else:
        net = tp.MLP(tp.mup(L), 3, 2, phi="tanh", sigma=[1.3, 0.7, 1.2])
        r = tp.Routine(lr=0.4, **N8)
    runs = {z: tp.simulate_limit(net, r, particles=2 ** 14, replicates=16,
                                 seed=5 + (z == "tangent"), zdot=z, record=())
            for z in ("stein", "tangent")}
    s, t = runs["stein"], runs["tangent"]
    agree(s, t)
    assert t.meta["zdot"] == "tangent"
    # and the Ż terms matter: without them (decoupled) the answer moves by many SE
    dec = tp.simulate_limit(net, r, particles=2 ** 14, replicates=16, seed=7, record=(),
                            backprop="decoupled")
    assert differ(dec, t, 10)


def test_tangent_estimator_refuses_a_kinked_nonlinearity():
    """relu's φ″ is a point mass the particles never see: the tangent estimator sat ~10 SE
    from Stein on μP, L = 3, relu, B = 2.  It is refused before any work, naming Stein."""
    net = tp.MLP(tp.mup(3), 3, 2, phi="relu")
    with pytest.raises(tp.SpecError, match="zdot='stein'"):
        tp.simulate_limit(net, tp.Routine(lr=0.4, **N8), zdot="tangent")
    tp.simulate_limit(net, tp.Routine(lr=0.4, **N8), particles=2_000, replicates=2)


def test_stein_relu_limit_matches_wide_networks():
    """With φ″ a point mass, Stein is the estimator: it needs no derivative of φ′."""
    net, r = tp.MLP(tp.mup(3), 3, 2, phi="relu"), tp.Routine(lr=0.4, **N8)
    lim = tp.simulate_limit(net, r, particles=2 ** 14, replicates=16, seed=2)
    fin = np.array([tp.train_finite(net, r, 4096, seed=s, record=()).f_eval for s in range(8)])
    mean, se = fin.mean(axis=0)[1:], fin.std(axis=0, ddof=1)[1:] / np.sqrt(len(fin))
    sl = lim.f_eval_se[1:]
    within_se(mean, lim.f_eval[1:], np.hypot(se, sl), welch_dof(se, 7, sl, lim.se_dof))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_history_kernels_match_their_numpy_twins(dtype):
    """The tiled passes of history_kernels.py (float32 or float64 rows, float64 sums)
    against plain NumPy, on sizes that leave every tile edge and block edge partial."""
    from tp_limits.limit.montecarlo import history_kernels as h
    rng = np.random.default_rng(0)
    k, m, N = 39, 7, 3001           # 39 = 4·9 + 3 = 8·4 + 7 rows, 7 = 4 + 3 columns
    R = rng.standard_normal((k, N)).astype(dtype)
    R64 = R.astype(np.float64)
    V, C = rng.standard_normal((m, N)), rng.standard_normal((k, m))
    np.testing.assert_allclose(h.rows_dot(R, V), R64 @ V.T, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(h.combine_rows(C, R), C.T @ R64, rtol=1e-12, atol=1e-12)
    for rows in (m, 5, 1):            # cross products of the rows that will be stored only
        Z = V.copy()
        cross = h.mean_and_cross(C, R, Z, rows)
        expect = (V + C.T @ R64).astype(dtype).astype(np.float64)
        # rounding to float32 after a differently ordered float64 sum: at most one ulp
        np.testing.assert_allclose(Z, expect, rtol=2 ** -23 if dtype == np.float32 else 1e-13,
                                   atol=1e-12)
        assert cross.shape == (k, rows)
        np.testing.assert_allclose(cross, R64 @ Z[:rows].T, rtol=1e-12, atol=1e-9)
    Z2 = V.copy()
    assert h.mean_and_cross(C, R, Z2, 0) is None and np.array_equal(Z2, Z)
    if dtype == np.float32:          # float32 sums would be visibly worse: not vacuous
        assert np.abs((R @ V.astype(np.float32).T) - R64 @ V.T).max() > 1e-6


def test_replicates_in_worker_processes_give_the_same_answer():
    net, r = tp.MLP(tp.mup(2), 2, 1, phi="tanh"), tp.Routine(lr=0.5, **D1)
    one = tp.simulate_limit(net, r, particles=2 ** 14, replicates=3, seed=4, record=())
    two = tp.simulate_limit(net, r, particles=2 ** 14, replicates=3, seed=4, record=(), workers=2)
    assert two.meta["workers"] == 2 and one.meta["workers"] == 1
    np.testing.assert_allclose(two.f_eval, one.f_eval, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(two.f_eval_se, one.f_eval_se, rtol=1e-6, atol=1e-12)
    with pytest.raises(tp.SpecError, match="workers"):
        tp.simulate_limit(net, r, workers=0)


@pytest.mark.parametrize("phi", ["id", "tanh"])
def test_float32_storage_agrees_with_float64(phi):
    """Histories stored in float32 (D1 repeats an input: a degenerate family) give the same
    limit within Monte Carlo error; linear: against the exact engine."""
    X, Y = np.tile(D1["X"], (2, 1)), np.tile(D1["Y"], (2, 1))
    r = tp.Routine(X, Y, lr=0.5, eval_inputs=D1["eval_inputs"])
    net = tp.MLP(tp.mup(3), 2, 1, phi=phi)
    f32 = tp.simulate_limit(net, r, method="monte_carlo", particles=2 ** 14, replicates=16,
                            seed=2, dtype=np.float32, record=())
    assert f32.meta["dtype"] == "float32"
    if phi == "id":
        ref = tp.simulate_limit(net, r).f_eval
        within_se(f32.f_eval[1:], ref[1:], f32.f_eval_se[1:], f32.se_dof)
    else:
        agree(f32, tp.simulate_limit(net, r, particles=2 ** 14, replicates=16, seed=1, record=()))


@pytest.fixture(scope="module")
def finite_tanh():
    r = tp.Routine(lr=0.5, **D1)
    out = {}
    for L in (2, 3):
        net = tp.MLP(tp.mup(L), 2, 1, phi="tanh")
        fin = np.array([tp.train_finite(net, r, 4096, seed=s, record=()).f_eval
                        for s in range(8)])
        out[L] = (net, r, fin.mean(axis=0), fin.std(axis=0, ddof=1) / np.sqrt(len(fin)))
    return out


@pytest.mark.parametrize("L", [2, 3])
def test_tanh_limit_matches_wide_networks_and_decoupled_does_not(finite_tanh, L):
    net, r, mean, se = finite_tanh[L]
    true = tp.simulate_limit(net, r, particles=2 ** 15, replicates=16, seed=3)
    dec = tp.simulate_limit(net, r, particles=2 ** 15, replicates=16, seed=3,
                            backprop="decoupled")
    st, sd = true.f_eval_se[1:], dec.f_eval_se[1:]
    within_se(mean[1:], true.f_eval[1:], np.hypot(se[1:], st),
              welch_dof(se[1:], 7, st, true.se_dof))
    z_dec = np.abs(mean - dec.f_eval)[1:] / np.hypot(se[1:], sd)
    assert np.median(z_dec) > 10                       # finite networks follow true backprop


@pytest.mark.parametrize("L", [2, 3])
def test_finite_tanh_networks_converge_at_rate_one_half(L):
    net, r = tp.MLP(tp.mup(L), 2, 1, phi="tanh"), tp.Routine(lr=0.5, **D1)
    limit = tp.simulate_limit(net, r, particles=2 ** 16, replicates=8, record=())
    study = tp.convergence(net, r, [512, 1024, 2048, 4096, 8192], seeds=12, limit=limit)
    assert study.limit_error < 0.2 * study.rms[-1]
    assert -0.6 <= study.exponent <= -0.4, (study.exponent, study.exponent_ci)


@pytest.mark.parametrize("param", [
    tp.ABC([0] * 4, [0, "1/2", "1/2", "oo"], [-1, 0, 0, 1], name="zero readout"),
    tp.ABC([0] * 4, [0, "1/2", "1/2", 1], [0, 0, 0, 1], name="S9: input layer frozen"),
])
def test_switch_limits_for_deep_networks(param):
    net, r = tp.MLP(param, 2, 1, phi="tanh"), tp.Routine(lr=0.5, **D1)
    limit = tp.simulate_limit(net, r, particles=2 ** 16, replicates=8, record=())
    study = tp.convergence(net, r, [256, 1024, 4096], seeds=8, limit=limit, executor="serial")
    assert study.rms[-1] < 0.5 * study.rms[0]          # n x16: expected x1/4
    assert -0.75 <= study.exponent <= -0.25, (study.exponent, study.exponent_ci)


def test_statistics_and_bad_input():
    net, r = tp.MLP(tp.mup(2), 2, 1, phi="tanh"), tp.Routine(lr=0.5, **D1)
    tr = tp.simulate_limit(net, r, particles=20_000, replicates=1)
    assert tr.stats["dh_rms"].shape == (4, 2) and np.all(tr.stats["dh_rms"][0] == 0)
    assert np.all(tr.stats["dh_rms"][1:] > 0.05)      # features move by Θ(1)
    with pytest.raises(tp.SpecError, match="one hidden layer"):
        tp.simulate_limit(net, r, method="quadrature")
    with pytest.raises(tp.SpecError, match="float32"):
        tp.simulate_limit(net, r, dtype=np.float16)
    with pytest.raises(tp.MemoryBudgetError, match="at most"):
        tp.simulate_limit(net, r, particles=10 ** 12)
    # a count that the Stein histories (~120 B per particle here) would fit but the
    # tangent derivative arrays (~770 B per particle) would not
    from tp_limits.engine.backend import numpy_backend
    n = int(0.8 * numpy_backend().available_bytes() / 300)
    with pytest.raises(tp.MemoryBudgetError, match="zdot='tangent'"):
        tp.simulate_limit(net, r, particles=n, zdot="tangent", replicates=1)
    with pytest.raises(tp.SpecError, match="replicates >= 2"):
        tp.simulate_limit(net, r, sampler="qmc", replicates=1)
    with pytest.raises(tp.SpecError, match="zdot"):
        tp.simulate_limit(net, r, zdot="adjoint")


def test_qmc_agrees_with_independent_draws_with_a_far_smaller_error_bar():
    """Deep QMC (the default with replicates): the same limit as independent draws within
    5 combined SE, at a standard error several times smaller for the same N."""
    net, r = tp.MLP(tp.mup(2), 2, 1, phi="tanh"), tp.Routine(lr=0.5, **D1)
    q = tp.simulate_limit(net, r, particles=2 ** 12, replicates=8, seed=5, record=())
    m = tp.simulate_limit(net, r, particles=2 ** 12, replicates=8, seed=5, record=(),
                          sampler="mc")
    assert q.meta["sampler"] == "qmc" and m.meta["sampler"] == "mc" and q.se_dof == 7
    agree(q, m)
    assert np.median(q.f_eval_se[1:]) < 0.3 * np.median(m.f_eval_se[1:])
    one = tp.simulate_limit(net, r, particles=2_000, replicates=1)
    assert one.meta["sampler"] == "antithetic"


def test_sobol_prefix_hands_out_rows_in_order_then_draws():
    from tp_limits.engine.backend import numpy_backend
    from tp_limits.limit.sampling import Draws, SobolPrefix
    b, n = numpy_backend(), 64
    pts = Draws(b, np.random.default_rng(4)).sobol_normals(5, n)
    pre = SobolPrefix(Draws(b, np.random.default_rng(4)), 5, n)
    assert np.array_equal(pre.normal((n, 2)), pts[:2].T)      # particle axis first
    assert np.array_equal(pre.normal((2, n)), pts[2:4])
    tail = pre.normal((2, n))                                 # one row left: drawn instead
    assert tail.shape == (2, n) and not np.isin(tail, pts).any() and not pre.spent
    assert np.array_equal(pre.normal((1, n)), pts[4:]) and pre.spent


def test_compiled_host_normals_are_numpys():
    """Draws' compiled normals are the host Generator's own numbers, interleaved with
    other draws from it, so fixed-seed runs keep their values."""
    from tp_limits.engine.normals import HostNormals, standard_normal
    a, b = np.random.default_rng(11), np.random.default_rng(11)
    fast = HostNormals(a)
    for shape in [(3, 5), (7,), (2, 1000), (0, 4), ()]:
        assert np.array_equal(fast.standard_normal(shape), b.standard_normal(shape))
        assert np.array_equal(a.integers(9, size=3), b.integers(9, size=3))
        assert np.array_equal(standard_normal(a, shape), b.standard_normal(shape))


def test_gram_factor_extended_by_blocks_solves_like_a_direct_solve():
    """The block-extended Cholesky factor against numpy.linalg.solve of C + Λ, with the
    ridges it documents: a zero block (its coefficients stay 0), a repeated vector (a
    singular C that the ridge regularizes) and a truncation that is then regrown."""
    from tp_limits.limit.montecarlo.gram import RCOND, GramFactor
    rng = np.random.default_rng(1)
    X = np.concatenate([np.zeros((2, 50)), rng.standard_normal((9, 50))])
    X[6] = X[4]                                       # a repeated vector: C is singular
    C = X @ X.T / 50
    g, ridges = GramFactor(len(X)), np.zeros(len(X))
    blocks = [(0, 2), (2, 5), (5, 8), (8, 11)]

    def same(got, A, x):
        """Both are backward-stable solves: equal up to eps x cond(A) (cond ~1e10 here)."""
        want = np.linalg.solve(A, x)
        bound = 10 * np.finfo(float).eps * np.linalg.cond(A) * np.abs(want).max()
        assert np.abs(got - want).max() <= bound
        np.testing.assert_allclose(A @ got, x, atol=1e-8)       # and C C⁺ κ = κ

    for k0, k in blocks:
        g.extend(C, k)
        scale = np.trace(C[:k, :k]) / k
        ridges[k0:k] = RCOND * scale if scale > 0 else 1.0
        x = X[:k] @ rng.standard_normal((50, 3)) / 50  # a κ: in the range of C (0 on zeros)
        same(g.solve(x), C[:k, :k] + np.diag(ridges[:k]), x)
        assert np.all(g.solve(x)[:2] == 0)
    g.truncate(5)
    assert g.k == 5
    g.extend(C, 11)                                    # regrown in one block
    ridges[5:] = RCOND * np.trace(C) / 11
    x = X @ rng.standard_normal((50, 2)) / 50
    same(g.solve(x), C + np.diag(ridges), x)


def test_reused_heap_serves_large_temporaries_from_the_heap_then_restores():
    """In a fresh process (no freed heap chunks to reuse): a 16 MiB array is a mapping of
    its own before the context, comes from the heap (below the program break) inside
    it, and is a mapping again after it (glibc only)."""
    import subprocess
    import sys

    from tp_limits.engine import heap
    if heap._glibc() is None:
        pytest.skip("not glibc")
    code = """
import ctypes, numpy as np
from tp_limits.engine import heap
libc = heap._glibc()
libc.sbrk.restype = ctypes.c_void_p
def on_heap():
    a = np.empty(1 << 21)
    return a.ctypes.data < libc.sbrk(0)
before = on_heap()
with heap.reused_heap():
    inside = on_heap()
print(before, inside, on_heap())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True", "False"], out


def test_ctrl_c_inside_a_fused_forward_undoes_its_stores(monkeypatch):
    """Ctrl-C after layer 2 stored this step's hats but before layer 3 did: the partial
    stores are forgotten, and the state the completed steps left is evaluated."""
    from tp_limits.limit.montecarlo import montecarlo
    from tp_limits.limit.montecarlo.families import Family
    store, evaluate = Family.store, montecarlo.DeepRun.evaluate
    calls, seen = {"store": 0}, []

    def flaky_store(self, *args, **kw):
        calls["store"] += 1
        if calls["store"] == 10:       # 4 stores per step (L = 3): step 2's second forward
            raise KeyboardInterrupt
        return store(self, *args, **kw)

    def spy(self, t):
        seen.append((t, sorted({f.k for f in (*self.F.values(), *self.G.values())})))
        return evaluate(self, t)

    monkeypatch.setattr(Family, "store", flaky_store)
    monkeypatch.setattr(montecarlo.DeepRun, "evaluate", spy)
    net, r = tp.MLP(tp.mup(3), 2, 1, phi="tanh"), tp.Routine(lr=0.5, **D1)
    tr = tp.simulate_limit(net, r, particles=2_000, replicates=1, seed=3)
    assert tr.interrupted and tr.completed_steps == 2
    assert seen[-1] == (2, [2])                   # every family back to B · 2 rows
    assert np.all(np.isfinite(tr.f_eval[:3]))


def test_tangent_columns_are_ordered_by_step():
    """Each layer's derivative columns: F^m and G^{m+1} hats interleaved step by step, so
    the hats drawn up to any step are a prefix (tangent.py, active columns)."""
    from tp_limits.limit.montecarlo.tangent import Tangents
    B, T, L = 3, 4, 4
    tan = Tangents(5, L, 2, 1, B * T, (1.0,) * (L + 1), B)
    j = np.arange(B * T)
    for m in range(1, L + 1):
        cols = np.concatenate([tan.col_F(m, j)] * (m >= 2) + [tan.col_G(m, j)] * (m <= L - 1))
        assert np.array_equal(np.sort(cols), np.arange(tan.D[m]))
        for t in range(T):              # after step t's forward hats: a prefix
            drawn = np.concatenate([tan.col_F(m, j[:B * (t + 1)])] * (m >= 2)
                                   + [tan.col_G(m, j[:B * t])] * (m <= L - 1))
            assert np.array_equal(np.sort(drawn), np.arange(len(drawn)))


def test_an_overflowing_deep_limit_is_a_divergence_with_its_layer():
    """lr = 1e308: the law of the next layer's hats is no longer finite. A DivergenceError
    names the step and layer (it used to be numpy's LinAlgError from the eigensolver),
    and on_divergence='stop' keeps the steps before it."""
    net = tp.MLP(tp.mup(2), 2, 1)
    with pytest.raises(tp.DivergenceError, match="step 1: pre-activation h .* of layer 2"):
        tp.simulate_limit(net, d1(lr=1e308), particles=2000, replicates=2)
    tr = tp.simulate_limit(net, d1(lr=1e308), particles=2000, replicates=2,
                           on_divergence="stop")
    assert (tr.divergence.step, tr.divergence.layer, tr.completed_steps) == (1, 2, 1)
    # the state after step 0 could not be evaluated: its row is NaN, as unevaluated rows are
    assert tr.f_eval.shape[0] == 2 and np.all(np.isfinite(tr.f_eval[0]))
    assert np.all(np.isnan(tr.f_eval[1])) and np.all(np.isfinite(tr.loss))


def test_the_time_estimate_grows_like_t_squared_and_time_budget_none_lifts_the_refusal():
    """Long runs: the history term dominates (time ∝ T²); short ones are priced by their
    per-step terms, which a T²-only estimate left out (it said 0.003 s for a 9.7 s run)."""
    from tp_limits.limit.montecarlo.engine import COST, cost_units, time_estimate
    from tp_limits.limit.simulate import prepare_limit
    from tp_limits.spec import Problem
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 2))
    net = tp.MLP(tp.mup(2), 2, 1)

    def routine(T):       # batch 1 and 64 eval inputs: a long run that fits in ~3 GB
        return tp.Routine(X[:T], X[:T, :1], lr=0.1, batch_size=1, eval_inputs=X[:64])
    a, b = (time_estimate(Problem(net, routine(T)), 30_000, np.float32, 2, 1) for T in (1000, 2000))
    assert 3.5 < b / a <= 4.0          # the T² term dominates; the per-step terms add ~10 %
    short = Problem(net, routine(15))
    hist = cost_units(short, 2 ** 14)[0] * COST[0]
    assert time_estimate(short, 2 ** 14, np.float64, 1, 1) > 5 * hist
    plan = prepare_limit(net, routine(4000), particles=30_000, dtype=np.float32, replicates=1,
                         time_budget=None)                     # checked, nothing run
    assert plan.engine.info["time_estimate_s"] > 3600


def test_arrays_that_grow_like_T_squared_are_counted_before_any_work():
    """The deep Monte Carlo engine's (B·T)² Gram arrays, the exact deep linear engine's
    primitives and the kernel engine's P×P kernels do not grow with the particles; a long
    run or a large data set used to fail in numpy after the work had started."""
    from tp_limits.engine.backend import numpy_backend
    free = 0.8 * numpy_backend().available_bytes()
    # T steps of batch 1 whose history arrays alone are about twice the usable memory
    T = int((2 * free / (8 * 2 * 4)) ** 0.5) + 1
    X = np.tile(D1["X"], (T // 3 + 1, 1))[:T]
    Y = np.tile(D1["Y"], (T // 3 + 1, 1))[:T]
    r = tp.Routine(X, Y, lr=0.1, eval_inputs=D1["eval_inputs"])
    with pytest.raises(tp.MemoryBudgetError, match="history Gram arrays.*shorten the run"):
        tp.simulate_limit(tp.MLP(tp.mup(2), 2, 1, phi="tanh"), r, particles=100,
                          replicates=2, time_budget=None)
    with pytest.raises(tp.MemoryBudgetError, match="exact deep linear.*primitives"):
        tp.simulate_limit(tp.MLP(tp.mup(2), 2, 1, phi="id"), r)
    P = int((2 * free / (8 * 12)) ** 0.5) + 1                # ntp(2): (4L + 4) = 12 kernels
    rng = np.random.default_rng(0)
    wide = tp.Routine(rng.standard_normal((P, 2)), rng.standard_normal((P, 1)), lr=0.1,
                      eval_inputs=D1["eval_inputs"])
    with pytest.raises(tp.MemoryBudgetError, match="kernels of .* distinct inputs"):
        tp.simulate_limit(tp.MLP(tp.ntp(2), 2, 1, phi="tanh"), wide)


def test_a_run_with_fixed_draws_is_continuous_in_the_learning_rate():
    """The new hats' root is the symmetric one: with Q √w (eigenvectors of arbitrary sign
    that swap where eigenvalues cross) this run jumped by 0.035 in f for a relative change
    of 1e-6 in η.  Now the change is linear in the step (docs/theory.md §4.3)."""
    data = tp.datasets.digits(classes=3, seed=0)
    r = data.routine(lr=8.3, batch_size=8, steps=8, n_eval=40)
    net = tp.MLP(tp.mup(2), data.d_in, 3, phi="tanh")

    def f(lr):
        return tp.simulate_limit(net, r.with_lr(lr), particles=4000, replicates=1, seed=1,
                                 record=(), progress=False).f_eval[-1]
    base = f(8.3)
    steps = [np.abs(f(8.3 * (1 + h)) - base).max() for h in (1e-6, 1e-4)]
    assert steps[0] < 1e-4 and 50 < steps[1] / steps[0] < 200, steps
