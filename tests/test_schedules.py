"""Learning-rate schedules (tp_limits/spec/schedules.py, docs/theory.md §10.9): the helpers,
the Routine's peak and factors, every engine against a recursion written out here, and
finite networks against the scheduled limit.

Monte Carlo comparisons use the Student-t bound of conftest (probability 1e-4 of failing
on a true difference of zero) with the standard error's own degrees of freedom.
"""
import math

import numpy as np
import pytest
from conftest import D1, N8_LONG, finite_mean, t_quantile, welch_dof

import tp_limits as tp
from tp_limits.engine.backend import numpy_backend
from tp_limits.finite.network import FiniteNetwork
from tp_limits.spec import Problem
from tp_limits.spec import schedules as S


# ---- the helpers ---------------------------------------------------------------------------
def test_warmup_cosine_values():
    r = S.warmup_cosine(2.0, 10, warmup=2, final=0.1)
    assert r[0] == 1.0 and r[1] == 2.0 and r[2] == 2.0          # (t + 1)/w, then cos(0)
    t = np.arange(2, 10)
    assert np.allclose(r[2:], 2 * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * (t - 2) / 8))),
                       rtol=1e-15)
    assert np.all(np.diff(r[2:]) < 0) and r[-1] > 0.2 and not r.flags.writeable


def test_step_decay_and_linear_warmup_values():
    assert S.step_decay(1.0, 7, every=3, factor=0.5).tolist() == [1, 1, 1, .5, .5, .5, .25]
    assert S.step_decay(1.0, 5, every=2, factor=0.5, warmup=2).tolist() == [.5, 1, 1, 1, .5]
    assert S.linear_warmup(4.0, 5, 2).tolist() == [2, 4, 4, 4, 4]


@pytest.mark.parametrize("call, match", [
    (lambda: S.warmup_cosine(1.0, 5, warmup=6), "warmup = 6 exceeds steps = 5"),
    (lambda: S.warmup_cosine(1.0, 5, final=1.5), "final"),
    (lambda: S.warmup_cosine(-1.0, 5), "peak"),
    (lambda: S.step_decay(1.0, 5, every=0), "every"),
    (lambda: S.step_decay(1.0, 5, every=2, factor=0.0), "factor"),
    (lambda: S.named("cosine", 1.0, 5, {}), "choose one of"),
    (lambda: S.named("warmup_cosine", 1.0, 5, {"decay_every": 3}), "decay_every does not"),
    (lambda: S.named("step_decay", 1.0, 5, {}), "needs decay_every"),
])
def test_helpers_refuse_bad_settings(call, match):
    with pytest.raises(tp.SpecError, match=match):
        call()


# ---- the Routine ---------------------------------------------------------------------------
def test_a_schedule_is_its_peak_and_factors():
    r = tp.Routine(lr=[0.1, 0.4, 0.2], **D1)
    assert r.lr == 0.4 and np.allclose(r.lr_factors, [0.25, 1.0, 0.5], rtol=0, atol=0)
    f = tp.Routine(lr=lambda t: 0.1 * (t + 1), **D1)
    assert math.isclose(f.lr, 0.3) and np.allclose(f.lr_factors * f.lr, [0.1, 0.2, 0.3])
    assert tp.Routine(lr=[0.3] * 3, **D1).lr_factors is None          # constant: a number
    assert tp.Routine(lr=0.3, **D1).rates.tolist() == [1.0, 1.0, 1.0]
    # with_lr: a number moves the peak and keeps the shape (what lr_sweep sweeps)
    moved = r.with_lr(3.7)
    assert moved.lr == 3.7 and moved.lr_factors is r.lr_factors
    assert tp.Routine(lr=0.5, **D1).with_lr([0.1, 0.2, 0.1]).lr_factors is not None


@pytest.mark.parametrize("lr, match", [
    ([0.1, -0.2, 0.1], r"-0\.2 at step 1; every rate must be finite and >= 0"),
    ([0.1, np.nan, 0.1], "nan at step 1"),
    ([0.1, 0.2], r"one rate per step: 3 values"),
    ([[0.1, 0.2, 0.3]], r"shape \(1, 3\)"),
    ([0.0, 0.0, 0.0], "0 at every step"),
    (lambda t: 1 / (t - 1), "raised ZeroDivisionError at step 1"),
    (lambda t: "fast", "returned 'fast' at step 0"),
    ("0.1", "must be a positive number"),
    (None, "must be a positive number"),
    (-0.1, "positive finite number"),
])
def test_bad_schedules_are_refused_before_any_work(lr, match):
    with pytest.raises(tp.SpecError, match=match):
        tp.Routine(lr=lr, **D1)


def test_zero_rates_are_allowed_and_recorded():
    r = tp.Routine(lr=[0.5, 0.0, 0.5], **D1)
    tr = tp.train_finite(tp.MLP(tp.mup(1), 2, 1), r, 32, progress=False)
    assert tr.meta["lr"] == 0.5 and tr.meta["lr_schedule"] == [1.0, 0.0, 1.0]
    assert tp.train_finite(tp.MLP(tp.mup(1), 2, 1), d1_const(), 32).meta["lr_schedule"] is None


def d1_const():
    return tp.Routine(lr=0.5, **D1)


# ---- a constant schedule is the constant rate, bit for bit ---------------------------------
@pytest.mark.parametrize("net, opt, kw", [
    (tp.MLP(tp.mup(2), 3, 2, phi="tanh"), tp.SGD(momentum=0.8, weight_decay=0.3),
     dict(particles=2000, replicates=2)),
    (tp.MLP(tp.mup(1), 3, 2, phi="tanh"), None, dict(particles=4096, replicates=2)),
    (tp.MLP(tp.mup(2), 3, 2, phi="id"), tp.SGD(momentum=0.8), {}),
    (tp.MLP(tp.ntp(2), 3, 2, phi="relu"), None, {}),
    (tp.MLP(tp.mup(2, optimizer="adam"), 3, 2, phi="tanh"), tp.Adam(weight_decay=0.1),
     dict(particles=1000, replicates=2)),
], ids=["deep-mc", "one-hidden-kernel", "deep-linear", "kernel-regime", "deep-adam"])
def test_a_constant_schedule_changes_nothing(net, opt, kw):
    """lr = [η, η + 0, …] is stored as the number η: every engine gives the same bits."""
    const = tp.Routine(lr=0.3, optimizer=opt, **N8_LONG)
    rates = np.full(const.steps, 0.3)
    rates[0] = 0.3 + 0.0
    sched = tp.Routine(lr=rates, optimizer=opt, **N8_LONG)
    a = tp.simulate_limit(net, const, seed=3, progress=False, **kw)
    b = tp.simulate_limit(net, sched, seed=3, progress=False, **kw)
    assert np.array_equal(a.f_eval, b.f_eval)
    fa = tp.train_finite(net, const, 64, seed=1, progress=False)
    fb = tp.train_finite(net, sched, 64, seed=1, progress=False)
    assert np.array_equal(fa.f_eval, fb.f_eval)


def test_a_factor_of_one_leaves_every_rule_bitwise():
    """The rules multiply by the factor; at 1.0 that is exact, so the schedule path of the
    deep engine with all factors 1 equals the constant path (whose plain-SGD shortcut
    skips the schedule)."""
    rng = np.random.default_rng(0)
    for opt in (tp.SGD(momentum=0.7, weight_decay=0.2), tp.SGD(momentum=0.7, nesterov=True),
                tp.Adam(weight_decay=0.1)):
        z, g = rng.standard_normal(50), rng.standard_normal(50)
        st = opt.rule.zeros(z)
        for t in (1, 2):
            s1, h1 = opt.coordinate(0.3, 1.5, 0.02, t)
            s2, h2 = opt.coordinate(0.3, 1.5, 0.02, t, 1.0)
            assert s1 == s2 and h1 == h2
            z, st = opt.rule.apply(z, s1 * g, st, h1)


# ---- schedules of the deep engines, against the weights' recursion -------------------------
@pytest.mark.parametrize("opt", [tp.SGD(), tp.SGD(momentum=0.9, weight_decay=0.5),
                                 tp.SGD(momentum=0.8, weight_decay=0.3, nesterov=True)],
                         ids=["plain", "heavy-ball", "nesterov"])
def test_schedule_with_rates_reproduces_pytorch_steps_on_matrices(opt):
    """W_t = ρ_t W_0 − Σ_s C[t, s] γ G_s with the rates inside ρ and C, against PyTorch's
    step written out on random matrices (γ = 1): buf ← μ buf + G_t + δ W_t, then
    W ← W − s_t buf (Nesterov: W ← W − s_t (G_t + δ W_t + μ buf))."""
    rng = np.random.default_rng(1)
    T, delta = 8, 0.1 if opt.weight_decay else 0.0
    rates = S.warmup_cosine(1.0, T, warmup=3, final=0.2)
    W0, G = rng.standard_normal((4, 3)), rng.standard_normal((T, 4, 3))
    W, buf, path = W0.copy(), np.zeros_like(W0), [W0]
    for t in range(T):
        d = G[t] + delta * W
        buf = opt.momentum * buf + d
        W = W - rates[t] * (d + opt.momentum * buf if opt.nesterov else buf)
        path.append(W)
    rho, C = opt.schedule(delta, T, rates)
    for t in range(T + 1):
        assert np.allclose(path[t], rho[t] * W0 - np.einsum("s,sij->ij", C[t], G),
                           rtol=1e-13, atol=1e-13)
    assert np.array_equal(opt.init_factor(delta, T, rates), rho)


# ---- the exact engines against recursions written here ------------------------------------
def _one_hidden_linear_moments(net, routine):
    """The one-hidden-layer linear μP limit under plain SGD with a schedule, as a recursion
    of the second moments K = E[Z^U Z^Uᵀ], M = E[Z^U Z^{nV}ᵀ], N = E[Z^{nV} Z^{nV}ᵀ]
    (f(ξ) = α Mᵀξ): with g = Σ_i ξ_i χ_iᵀ, a = s_t η_1, b = s_t η_2,
    Z^U ← Z^U − a α g Z^{nV} and Z^{nV} ← Z^{nV} − b α gᵀ Z^U, so
    K' = K − aα(gMᵀ + Mgᵀ) + a²α² gNgᵀ, M' = M − bαKg − aαgN + abα² gMᵀg,
    N' = N − bα(gᵀM + Mᵀg) + b²α² gᵀKg.  Independent of the engine's coefficient form."""
    P = Problem(net, routine)
    c = net.limit_constants(routine.lr)
    al, s1, s2 = c.alpha, c.sigma[0], c.sigma[1]
    d, do = net.d_in, net.d_out
    K, M = s1 ** 2 * np.eye(d), np.zeros((d, do))
    N = (s2 ** 2 if c.readout_init else 0.0) * np.eye(do)
    out = [al * routine.eval_inputs @ M]
    for t in range(P.T):
        Xb, Yb = P.batch(t)
        f = al * Xb @ M
        chi = P.loss.grad(f, Yb, np) / P.B
        g = Xb.T @ chi
        a, b = routine.rates[t] * c.eta[0], routine.rates[t] * c.eta[1]
        K, M, N = (K - a * al * (g @ M.T + M @ g.T) + a * a * al * al * g @ N @ g.T,
                   M - b * al * K @ g - a * al * g @ N + a * b * al * al * g @ M.T @ g,
                   N - b * al * (g.T @ M + M.T @ g) + b * b * al * al * g.T @ K @ g)
        out.append(al * routine.eval_inputs @ M)
    return np.array(out)


def test_exact_one_hidden_linear_limit_with_a_schedule_equals_the_moment_recursion():
    net = tp.MLP(tp.mup(1), 3, 2, phi="id", sigma=[1.3, 0.7], readout_multiplier=1.4)
    X = np.vstack([N8_LONG["X"]] * 4)
    Y = np.vstack([N8_LONG["Y"]] * 4)
    r = tp.Routine(X, Y, lr=S.warmup_cosine(0.6, 12, warmup=3, final=0.1), batch_size=2,
                   eval_inputs=N8_LONG["eval_inputs"])
    lim = tp.simulate_limit(net, r)
    assert lim.meta["method"] == "exact"
    ref = _one_hidden_linear_moments(net, r)
    assert np.abs(lim.f_eval - ref).max() < 1e-12 * max(1.0, np.abs(ref).max())
    assert np.abs(lim.f_eval - tp.simulate_limit(net, r.with_lr(0.6 * np.ones(12))).f_eval
                  ).max() > 0.05                                 # the schedule mattered


def test_a_zero_rate_step_of_plain_sgd_is_a_step_left_out():
    """Deep linear limit, plain SGD: a step at rate 0 changes nothing, so the run equals the
    routine without that step (the exact engine's schedule and pair sums, to 1e-12)."""
    net = tp.MLP(tp.mup(3), 3, 2, phi="id")
    X, Y = N8_LONG["X"], N8_LONG["Y"]
    E = N8_LONG["eval_inputs"]
    with_zero = tp.Routine(X, Y, lr=[0.4, 0.0, 0.2], batch_size=2, eval_inputs=E)
    keep = np.r_[0:2, 4:6]
    without = tp.Routine(X[keep], Y[keep], lr=[0.4, 0.2], batch_size=2, eval_inputs=E)
    a, b = tp.simulate_limit(net, with_zero), tp.simulate_limit(net, without)
    assert np.abs(a.f_eval[[0, 1, 3]] - b.f_eval).max() < 1e-12
    assert np.abs(a.f_eval[2] - a.f_eval[1]).max() < 1e-14


def test_kernel_regime_with_a_schedule_is_scheduled_kernel_descent():
    """NTP (kernel regime), f_0 = 0: f ← f − η s_t K(·, ξ_t) χ_t with the NTK, written
    here with tp.ntk, to 1e-12."""
    net = tp.MLP(tp.ntp(2), 3, 2, phi="relu")
    rates = [0.2, 0.7, 0.35]
    r = tp.Routine(lr=rates, **N8_LONG)
    lim = tp.simulate_limit(net, r, f0="zero")
    P = Problem(net, r)
    E = N8_LONG["eval_inputs"]
    f_tr = {i: np.zeros(2) for i in range(len(r.X))}
    f_ev = np.zeros((len(E), 2))
    for t in range(P.T):
        rows = range(2 * t, 2 * t + 2)
        Xb, Yb = P.batch(t)
        chi = P.loss.grad(np.array([f_tr[i] for i in rows]), Yb, np) / 2
        step = lambda Z: rates[t] * tp.ntk(net, Z, Xb) @ chi          # noqa: E731
        f_ev = f_ev - step(E)
        moved = step(r.X)
        for i in f_tr:
            f_tr[i] = f_tr[i] - moved[i]
        assert np.abs(lim.f_eval[t + 1] - f_ev).max() < 1e-12


# ---- finite networks --------------------------------------------------------------------------
def test_finite_adamw_with_a_schedule_is_torch_adamw_written_out():
    """One-hidden linear μP-Adam net, w-space AdamW with a schedule: w ← (1 − s_t lr λ_l) w,
    then w ← w − s_t lr_l m̂/(√v̂ + ε_l), from the definitions (ε_l = ε n^{-g_l})."""
    net = tp.MLP(tp.mup(1, optimizer="adam"), 2, 1, phi="id")
    opt = tp.Adam(eps=1e-3, weight_decay=0.2)
    rates = [0.5, 1.0, 0.25]
    r = tp.Routine(lr=[0.02 * s for s in rates], optimizer=opt, **D1)
    n = 48
    nw = FiniteNetwork(net, n, r.lr, 5, numpy_backend(), np.float64, optimizer=opt)
    a, b, c = (tuple(float(x) for x in v) for v in net.param._fractions)
    g_exp = [float(x) for x in net.eps_exponents()]
    rng = np.random.default_rng(5)
    w = [rng.standard_normal((n, 2)) * n ** -b[0], rng.standard_normal((1, n)) * n ** -b[1]]
    m, v = [np.zeros_like(x) for x in w], [np.zeros_like(x) for x in w]
    P = Problem(net, r)
    b1, b2 = opt.betas
    for t in range(P.T):
        Xb, Yb = P.batch(t)
        hs, xs, f = nw.forward(Xb, t)
        nw.step(hs, xs, f - Yb, r.rates[t])
        W1, W2 = n ** -a[0] * w[0], n ** -a[1] * w[1]
        chi = (W2 @ W1 @ Xb.T - Yb.T).T
        grads = [n ** -a[0] * (W2.T @ chi.T) @ Xb, n ** -a[1] * chi.T @ (W1 @ Xb.T).T]
        for l in range(2):
            lr_l = r.lr * n ** -c[l]
            w[l] = w[l] * (1 - r.rates[t] * r.lr * opt.weight_decay)
            m[l] = b1 * m[l] + (1 - b1) * grads[l]
            v[l] = b2 * v[l] + (1 - b2) * grads[l] ** 2
            mh, vh = m[l] / (1 - b1 ** (t + 1)), v[l] / (1 - b2 ** (t + 1))
            w[l] = w[l] - r.rates[t] * lr_l * mh / (np.sqrt(vh) + opt.eps * n ** -g_exp[l])
    for W, wl, al in zip(nw.W, w, a):
        assert np.allclose(W, n ** -al * wl, rtol=1e-12, atol=1e-15)



@pytest.mark.slow
@pytest.mark.parametrize("net, opt, kw", [
    (tp.MLP(tp.mup(2), 3, 2, phi="tanh"), tp.SGD(momentum=0.8, weight_decay=0.2),
     dict(particles=2 ** 14, replicates=8)),
    (tp.MLP(tp.mup(1), 3, 2, phi="tanh"), None, dict(particles=2 ** 16, replicates=8)),
    (tp.MLP(tp.mup(2, optimizer="adam"), 3, 2, phi="tanh"), tp.Adam(),
     dict(particles=4000, replicates=8, partners=256)),
], ids=["deep-momentum", "one-hidden-plain", "deep-adam"])
def test_scheduled_limits_match_finite_networks_at_width_4096(net, opt, kw):
    """A warm-up + cosine schedule: the Monte Carlo limit against 6 finite nets at width
    4096 at the last step, within the t bound of the combined standard error (Welch's
    degrees of freedom); the same limit at the constant peak rate is outside that bound."""
    X = np.vstack([N8_LONG["X"]] * 2)
    Y = np.vstack([N8_LONG["Y"]] * 2)
    lr = 0.05 if opt is not None and opt.name == "adam" else 0.6
    rates = S.warmup_cosine(lr, 6, warmup=2, final=0.1)
    r = tp.Routine(X, Y, lr=rates, batch_size=2, eval_inputs=N8_LONG["eval_inputs"],
                   optimizer=opt)
    lim = tp.simulate_limit(net, r, progress=False, **kw)
    mean, se = finite_mean(net, r, 4096, 6)
    combined = np.hypot(se[-1], lim.f_eval_se[-1])
    q = t_quantile(welch_dof(se[-1], 5, lim.f_eval_se[-1], lim.status.se_dof))
    assert np.all(np.abs(mean[-1] - lim.f_eval[-1]) <= q * combined), (mean[-1], lim.f_eval[-1])
    flat = tp.simulate_limit(net, r.with_lr(np.full(6, lr)), progress=False, **kw)
    assert np.any(np.abs(flat.f_eval[-1] - lim.f_eval[-1]) > q * combined)


# ---- lr_sweep, experiment files, torch -----------------------------------------------------------
@pytest.mark.filterwarnings("ignore:lr_sweep")
def test_lr_sweep_sweeps_the_peak_and_keeps_the_shape():
    net = tp.MLP(tp.mup(2), 2, 1, phi="id")
    r = tp.Routine(lr=[0.2, 0.4, 0.1], **D1)
    sw = tp.lr_sweep(net, r, [0.2, 0.4, 0.8], widths=[32, 64], seeds=2, refine=0,
                     executor="serial", progress=False)
    for lr in (0.2, 0.8):
        want = tp.train_finite(net, r.with_lr(lr), 64, seed=1, record=()).loss[-1]
        got = [x["value"] for x in sw.records if x["width"] == 64 and x["lr"] == lr
               and x["seed"] == 1]
        assert got == [want]
        lim = tp.simulate_limit(net, r.with_lr(lr)).loss[-1]
        assert [x["value"] for x in sw.records if x["width"] == "inf" and x["lr"] == lr] == [lim]
    const = tp.lr_sweep(net, tp.Routine(lr=0.4, **D1), [0.2, 0.4, 0.8], widths=[32, 64],
                        seeds=2, refine=0, executor="serial", progress=False)
    assert const.records != sw.records


def test_experiment_file_schedules(tmp_path):
    from tp_limits.experiment import ExperimentError, build
    base = {"parametrization": {"preset": "mup", "L": 1}, "data": {"generator": "d1"},
            "routine": {"lr": 0.5, "steps": 10, "schedule": "step_decay", "decay_every": 4,
                        "decay_factor": 0.5},
            "limit": {"particles": 1000, "replicates": 2}, "finite": {"widths": [32, 64]}}
    exp = build(base)
    assert exp.routine.lr == 0.5
    assert (exp.routine.lr_factors.tolist() == [1.0] * 4 + [0.5] * 4 + [0.25] * 2)
    for routine, match in [({"lr": 0.5, "warmup": 3}, "routine.warmup needs routine.schedule"),
                           ({"lr": 0.5, "schedule": "warmup_cosine", "decay_every": 3},
                            "decay_every does not apply"),
                           ({"lr": 0.5, "schedule": "step_decay"}, "needs decay_every"),
                           ({"lr": 0.5, "schedule": "cosine"}, "schedule")]:
        with pytest.raises(ExperimentError, match=match):
            build({**base, "routine": {"steps": 10, **routine}})


def test_to_torch_steps_its_scheduler_as_train_finite_steps():
    pytest.importorskip("torch")
    net = tp.MLP(tp.mup(2), 3, 2, phi="tanh")
    for opt in (tp.SGD(momentum=0.8, weight_decay=0.2), tp.SGD(momentum=0.8, nesterov=True),
                tp.Adam(weight_decay=0.1)):
        n = tp.MLP(tp.mup(2, optimizer=opt.exponents), 3, 2, phi="tanh")
        lr = 0.02 if opt.name == "adam" else 0.5
        r = tp.Routine(lr=[lr, 0.5 * lr, 0.25 * lr], optimizer=opt, **N8_LONG)
        tm = tp.to_torch(n, 64, seed=2, routine=r)
        assert tm.scheduler is not None
        got = tm.train(r, n)
        want = tp.train_finite(n, r, 64, seed=2).f_eval
        assert np.abs(got - want).max() < 1e-12, opt
    assert tp.to_torch(net, 64, routine=tp.Routine(lr=0.5, **N8_LONG)).scheduler is None
