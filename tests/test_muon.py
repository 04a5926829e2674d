"""Muon (tp_limits/spec/optimizers/muon.py, docs/theory.md §11): the low-rank msign against
the dense iteration, finite networks against a dense implementation written here, the
classifier's exponents against coordinate checks, and the refusals."""
import numpy as np
import pytest
from conftest import (D1, N8_LONG, against_reference, exact_against_monte_carlo, finite_mean,
                      t_quantile, welch_dof)

import tp_limits as tp
from tp_limits.engine.backend import numpy_backend
from tp_limits.finite.network import FiniteNetwork
from tp_limits.spec import Problem
from tp_limits.spec.optimizers import muon as M
from tp_limits.spec.optimizers import transforms as TR

NS = TR.NS_COEFFS


def dense_ns(D, steps):
    """Newton–Schulz exactly as written: X ← aX + (bA + cA²)X, A = X Xᵀ."""
    a, b, c = NS
    X = D / (np.linalg.norm(D) + TR.NS_EPS)
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X
    return X


def dense_polar(D, rtol=TR.POLAR_RTOL):
    U, s, Vt = np.linalg.svd(D, full_matrices=False)
    keep = s > rtol * s.max()
    return U[:, keep] @ Vt[keep]


@pytest.mark.parametrize("shape, k", [((40, 40), 6), ((50, 30), 9), ((30, 50), 9),
                                      ((512, 512), 12)])
def test_cores_are_the_dense_iteration(shape, k):
    """Pᵀ K Q from the k × k core equals the iteration on the dense D = Pᵀ C Q (1e-10)."""
    rng = np.random.default_rng(0)
    P, Q = rng.standard_normal((k, shape[0])), rng.standard_normal((k, shape[1]))
    C = np.diag(rng.uniform(0.1, 2.0, k))
    D = P.T @ C @ Q
    GP, GQ = P @ P.T, Q @ Q.T
    for steps in (1, 5):
        got = P.T @ TR.newton_schulz_core(C, GP, GQ, steps) @ Q
        assert np.abs(got - dense_ns(D, steps)).max() < 1e-10
    exact = P.T @ TR.polar_core(C, GP, GQ) @ Q
    assert np.abs(exact - dense_polar(D)).max() < 1e-10
    assert np.allclose(np.linalg.svd(exact, compute_uv=False)[:k], 1.0, atol=1e-10)
    # the dense routes on the smaller side's Gram
    assert np.abs(TR.newton_schulz_dense(D, 5) - dense_ns(D, 5)).max() < 1e-10
    assert np.abs(TR.polar_dense(D) - dense_polar(D)).max() < 1e-10


class DenseMuon(tp.Muon):
    """Muon with a dense momentum buffer and the iteration on the dense n_out × n_in update,
    as a reference (the package's never forms an n × n product of dense matrices)."""

    def finite_state(self, W, l, layers, backend):
        opt = self.layer_optimizer(l, layers)
        if not isinstance(opt, M.BufferUpdate):             # Adam on the vector layers
            return opt.finite_state(W, l, layers, backend)
        return (np.zeros_like(W),)

    def finite_step(self, W, state, G, X, const, l, t, backend, rate=1.0):
        layers = len(const.lr)
        opt = self.layer_optimizer(l, layers)
        if not isinstance(opt, M.BufferUpdate):
            return opt.finite_step(W, state, G, X, const, l, t, backend, rate)
        (Mb,) = state
        Gw = G.T @ X
        Mb *= self.momentum
        Mb += Gw
        D = Gw + self.momentum * Mb if self.nesterov else Mb.copy()
        scale = M._norm_scale(const, l, *W.shape)
        U = dense_polar(D) if self.ns_steps is None else dense_ns(scale * D, self.ns_steps)
        W *= 1.0 - rate * self.shrinks(const.decay)[l]
        W -= rate * const.adam_lr[l] * const.w_scale[l] * M.shape_factor(l, layers, W.shape) * U


@pytest.mark.parametrize("opt", [
    dict(), dict(nesterov=False, momentum=0.8), dict(ns_steps=None), dict(momentum=0.0),
    dict(weight_decay=0.2, ns_steps=3), dict(vector_layers="adam", weight_decay=0.1)],
    ids=["default", "heavy-ball", "exact-polar", "no-momentum", "decay", "adam-vectors"])
@pytest.mark.parametrize("n", [16, 256])
def test_finite_update_equals_the_dense_iteration(opt, n):
    """Every layer kind (input n × d, hidden n × n, readout d_out × n), six steps of batch 2
    with a schedule: the low-rank update against the dense reference, to 1e-10 relative."""
    kind = "muon_adam" if opt.get("vector_layers") == "adam" else "muon"
    net = tp.MLP(tp.mup(3, optimizer=kind), 3, 2, phi="tanh")
    against_reference(net, tp.Muon(**opt), DenseMuon(**opt), n)


def test_the_update_has_spectral_norm_eta_times_the_fan_ratio():
    """μP-Muon in TP4 form: after one step from a zero buffer, ‖ΔW^l‖_* = η √(fan_out/fan_in)
    for every layer (exact polar factor: all singular values 1)."""
    n, d, do = 300, 3, 2
    net = tp.MLP(tp.mup(2, optimizer="muon"), d, do, phi="tanh")
    opt = tp.Muon(ns_steps=None, momentum=0.0)
    r = tp.Routine(lr=0.07, optimizer=opt, **{**N8_LONG, "batch_size": 2})
    P = Problem(net, r)
    nw = FiniteNetwork(net, n, r.lr, 0, numpy_backend(), np.float64, optimizer=opt)
    W0 = [w.copy() for w in nw.W]
    Xb, Yb = P.batch(0)
    hs, xs, f = nw.forward(Xb, 0)
    nw.step(hs, xs, P.loss.grad(f, Yb, np) / 2)
    fans = [(n, d), (n, n), (do, n)]
    for W, w0, (fo, fi) in zip(nw.W, W0, fans):
        s = np.linalg.svd(W - w0, compute_uv=False)
        s = s[s > 1e-8 * s.max()]
        assert np.allclose(s, 0.07 * np.sqrt(fo / fi), rtol=1e-9)


# ---- the classifier ----------------------------------------------------------------------------
def test_mup_muon_learns_features_with_every_layer_maximal():
    for L in (1, 2, 3):
        p = tp.mup(L, optimizer="muon")
        k = p.classify()
        assert p.c == (0,) * (L + 1) and p.a == tp.mup(L).a and p.b == tp.mup(L).b
        assert k.stable and k.regime == "feature_learning" and all(k.updated_maximally)
    a0 = tp.mup(2, optimizer="muon", form="a0")
    assert [str(x) for x in a0.c] == ["-1/2", "0", "1/2"]
    hybrid = tp.mup(2, optimizer="muon_adam")
    assert hybrid.classify().regime == "feature_learning"
    assert [str(x) for x in hybrid.c] == ["1/2", "0", "1/2"]


def unscaled(L):
    """ΔW^l = −η msign(D) for every layer, from μP's initialization."""
    mup = tp.mup(L)
    return tp.ABC(mup.a, mup.b, [-x for x in mup.a], optimizer="muon", name="Muon, unscaled")


def test_unscaled_muon_is_unstable_and_says_where():
    k = unscaled(2).classify()
    assert not k.stable
    assert any("readout" in v and "n^(1/2)" in v for v in k.violations), k.violations
    assert str(k.r_layers[0]) == "1/2"          # the input layer's update vanishes as n^-1/2


@pytest.mark.slow
@pytest.mark.parametrize("param", [tp.mup(2, optimizer="muon"), unscaled(2)],
                         ids=["mup-muon", "unscaled"])
def test_coord_check_measures_the_predicted_exponents(param):
    """Every update quantity's width exponent within 0.15 of the classifier's (a small η:
    the unscaled readout's output grows like √n · η, and must stay below saturation over
    the widths measured)."""
    net = tp.MLP(param, 3, 2, phi="tanh")
    r = tp.Routine(lr=0.01, optimizer=tp.Muon(), **N8_LONG)
    cc = tp.coord_check(net, r, widths=[256, 512, 1024, 2048], seeds=3, executor="serial",
                        record=("stats",))
    checked = [f for f in cc.fits if f.quantity in
               ("delta_h", "delta_x", "delta_W_x", "frobenius_ratio", "delta_f")]
    assert len(checked) == 33                       # t = 1, 2, 3
    for f in checked:
        assert abs(f.slope - f.predicted) < 0.15, (f.quantity, f.layer, f.slope, f.predicted)


# ---- refusals ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    (dict(momentum=1.0), "momentum"), (dict(momentum=-0.1), "momentum"),
    (dict(ns_steps=-1), "ns_steps"), (dict(ns_steps=10 ** 6), "ns_steps"),
    (dict(ns_steps=2.5), "ns_steps"), (dict(vector_layers="sgd"), "vector_layers"),
    (dict(weight_decay=-1.0), "weight_decay"), (dict(adam_betas=(1.2, 0.9)), "adam_betas"),
])
def test_bad_muon_settings_are_refused(kw, match):
    with pytest.raises(tp.SpecError, match=match):
        tp.Muon(**kw)


def test_muon_with_a_parametrization_not_declared_for_it_is_refused():
    with pytest.raises(tp.SpecError, match="optimizer='muon'"):
        tp.train_finite(tp.MLP(tp.mup(2), 2, 1), tp.Routine(lr=0.1, optimizer=tp.Muon(), **D1),
                        32)
    with pytest.raises(tp.SpecError, match="muon_adam"):
        Problem(tp.MLP(tp.mup(2, optimizer="muon"), 2, 1),
                tp.Routine(lr=0.1, optimizer=tp.Muon(vector_layers="adam"), **D1))


def kernel_regime_muon():
    mup = tp.mup(2)
    return tp.ABC(mup.a, mup.b, ["1/2", "1/2", 0], optimizer="muon")


def test_muon_limits_refuse_what_does_not_apply():
    assert kernel_regime_muon().classify().regime == "kernel"
    with pytest.raises(tp.UnsupportedError, match="not linear in the gradients"):
        tp.simulate_limit(tp.MLP(kernel_regime_muon(), 2, 1),
                          tp.Routine(lr=0.1, optimizer=tp.Muon(), **D1))
    net = tp.MLP(tp.mup(2, optimizer="muon"), 2, 1)
    r = tp.Routine(lr=0.1, optimizer=tp.Muon(), **D1)
    with pytest.raises(tp.SpecError, match="coefficient matrix over stored pairs"):
        tp.simulate_limit(net, r, partners=64)
    with pytest.raises(tp.SpecError, match="zdot='tangent' follows plain SGD only"):
        tp.simulate_limit(net, r, zdot="tangent")


# ---- the limit ----------------------------------------------------------------------------------
def _moment_recursion(net, routine):
    """The one-hidden-layer linear μP-Muon limit without momentum and with the exact polar
    factor, as second moments K = E[Z^Uᵀ Z^U], M = E[Z^Uᵀ Z^{nV}], N = E[Z^{nV}ᵀ Z^{nV}]
    (f(ξ) = α Mᵀ ξ).  With Γ = Σ_i χ_i ξ_iᵀ the gradient rows are g^U = α Z^{nV} Γ and
    g^V = α Z^U Γᵀ, their Grams S_U = α² Γᵀ N Γ and S_V = α² Γ K Γᵀ, so
    Z^U += Z^{nV} A_U with A_U = −(η₁/√d) α Γ S_U^{−1/2} and Z^{nV} += Z^U A_V with
    A_V = −η₂ √d_out α Γᵀ S_V^{−1/2}: linear maps of the moments, written out here."""
    P = Problem(net, routine)
    c = net.limit_constants(routine.lr)
    al, d, do = c.alpha, net.d_in, net.d_out
    K, Mm, Nm = c.sigma[0] ** 2 * np.eye(d), np.zeros((d, do)), c.sigma[1] ** 2 * np.eye(do)

    def inv_sqrt(S):
        w, U = np.linalg.eigh(S)
        keep = w > TR.POLAR_RTOL ** 2 * w.max()
        return (U[:, keep] / np.sqrt(w[keep])) @ U[:, keep].T

    out = [al * routine.eval_inputs @ Mm]
    for t in range(P.T):
        Xb, Yb = P.batch(t)
        chi = P.loss.grad(al * Xb @ Mm, Yb, np) / P.B
        Gam = chi.T @ Xb
        s = routine.rates[t]
        AU = -(s * c.eta[0] / np.sqrt(d)) * al * Gam @ inv_sqrt(al ** 2 * Gam.T @ Nm @ Gam)
        AV = -(s * c.eta[1] * np.sqrt(do)) * al * Gam.T @ inv_sqrt(al ** 2 * Gam @ K @ Gam.T)
        K, Mm, Nm = (K + Mm @ AU + AU.T @ Mm.T + AU.T @ Nm @ AU,
                     Mm + K @ AV + AU.T @ Nm + AU.T @ Mm.T @ AV,
                     Nm + Mm.T @ AV + AV.T @ Mm + AV.T @ K @ AV)
        out.append(al * routine.eval_inputs @ Mm)
    return np.array(out)


def test_exact_linear_muon_limit_equals_the_moment_recursion():
    net = tp.MLP(tp.mup(1, optimizer="muon"), 3, 2, phi="id", sigma=[1.2, 0.8])
    opt = tp.Muon(momentum=0.0, ns_steps=None)
    r = tp.Routine(lr=[0.05, 0.1, 0.03], optimizer=opt, **N8_LONG)
    lim = tp.simulate_limit(net, r)
    assert lim.meta["method"] == "exact"
    ref = _moment_recursion(net, r)
    assert np.abs(lim.f_eval - ref).max() < 1e-12 * np.abs(ref).max()


@pytest.mark.parametrize("L", [1, 2])
@pytest.mark.parametrize("opt", [dict(), dict(ns_steps=None, nesterov=False, momentum=0.8,
                                              weight_decay=0.3)], ids=["default", "polar"])
def test_exact_linear_muon_limit_matches_monte_carlo(L, opt):
    """φ = id: the exact engine against the Monte Carlo engine on the same network, within
    the t bound of 8 independent replicates (plain Monte Carlo draws: their bias, at most
    0.2 of one replicate's standard error, docs/theory.md §11.4, is below the error of
    their mean)."""
    net = tp.MLP(tp.mup(L, optimizer="muon"), 3, 2, phi="id")
    exact_against_monte_carlo(net, tp.Routine(lr=0.05, optimizer=tp.Muon(**opt), **N8_LONG))



@pytest.mark.slow
@pytest.mark.parametrize("L", [1, 2, 3])
def test_muon_limit_matches_finite_networks_at_width_4096(L):
    """tanh μP-Muon, the default optimizer: 6 finite nets at width 4096 against the Monte
    Carlo limit, within the t bound of the combined standard error at every evaluated
    step; SGD's limit at the same rate is outside that bound."""
    net = tp.MLP(tp.mup(L, optimizer="muon"), 3, 2, phi="tanh")
    X, Y = np.vstack([N8_LONG["X"]] * 2), np.vstack([N8_LONG["Y"]] * 2)
    r = tp.Routine(X, Y, lr=0.05, batch_size=2, eval_inputs=N8_LONG["eval_inputs"],
                   optimizer=tp.Muon())
    lim = tp.simulate_limit(net, r, particles=2 ** 14, replicates=8)
    mean, se = finite_mean(net, r, 4096, 6)
    combined = np.hypot(se[1:], lim.f_eval_se[1:])
    q = t_quantile(welch_dof(se[1:], 5, lim.f_eval_se[1:], lim.status.se_dof))
    assert np.all(np.abs(mean[1:] - lim.f_eval[1:]) <= q * combined)
    plain = tp.Routine(X, Y, lr=0.05, batch_size=2, eval_inputs=N8_LONG["eval_inputs"])
    sgd = tp.simulate_limit(tp.MLP(tp.mup(L), 3, 2, phi="tanh"), plain, particles=2 ** 14,
                            replicates=8)
    assert np.any(np.abs(sgd.f_eval[-1] - lim.f_eval[-1]) > q[-1] * combined[-1])


@pytest.mark.filterwarnings("ignore:lr_sweep")
def test_lr_sweep_runs_muon_at_every_width_and_in_the_limit():
    net = tp.MLP(tp.mup(2, optimizer="muon"), 2, 1, phi="tanh")
    r = tp.Routine(lr=0.1, optimizer=tp.Muon(), **D1)
    sw = tp.lr_sweep(net, r, [0.02, 0.05, 0.1], widths=[32, 64], seeds=2, refine=0,
                     particles=500, replicates=2, executor="serial", progress=False)
    assert set(sw.optimal_lr) == {"inf", 32, 64} and not sw.no_limit
    lim = [x for x in sw.records if x["width"] == "inf"]
    assert len(lim) == 6 and all(np.isfinite(x["value"]) for x in lim)


@pytest.mark.parametrize("L", [1, 2])
def test_adam_on_the_vector_layers_has_no_exact_linear_limit(L):
    """Adam moves each particle by a nonlinear function of its own gradient, which
    coefficient vectors over Gaussian primitives cannot follow: a linear network under
    Muon(vector_layers='adam') runs the Monte Carlo engine, and method='exact' is refused
    (the exact engine once applied Adam to the coefficients: 0.034 off at N = 256 and
    1024 alike)."""
    opt = tp.Muon(vector_layers="adam")
    net = tp.MLP(tp.mup(L, optimizer=opt.exponents), 3, 2, phi="id")
    r = tp.Routine(lr=0.05, optimizer=opt, **N8_LONG)
    with pytest.raises(tp.SpecError, match="entrywise nonlinear rule"):
        tp.simulate_limit(net, r, method="exact")
    assert tp.simulate_limit(net, r, particles=256).meta["method"] == "monte_carlo"
    assert tp.simulate_limit(tp.MLP(tp.mup(L, optimizer="muon"), 3, 2, phi="id"),
                             tp.Routine(lr=0.05, optimizer=tp.Muon(), **N8_LONG)
                             ).meta["method"] == "exact"
