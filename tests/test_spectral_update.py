"""The spectral condition's update rules (tp_limits/spec/optimizers/spectral_update.py,
transforms.py; docs/theory.md §11.7): every transform against a plain SVD, finite networks
against a dense implementation written here, Muon as one of them bit for bit, the limits
against each other and against finite networks, the exponents against coordinate checks,
and the refusals."""
import numpy as np
import pytest
from conftest import (D1, N8_LONG, against_reference, exact_against_monte_carlo, t_quantile,
                      welch_dof)

import tp_limits as tp
from tp_limits.engine.backend import numpy_backend
from tp_limits.finite.network import FiniteNetwork
from tp_limits.spec import Problem
from tp_limits.spec.optimizers import muon as M
from tp_limits.spec.optimizers import transforms as TR


# ---- the transforms, against their definition by a full SVD ------------------------------------
def by_svd(D, f):
    """U f(Σ/σ_max) Vᵀ: the definition, with a full SVD, on D's numerical rank (singular
    values below max(shape) ε σ_max are D's rounding and are taken as 0, f(0) = 0: a clip
    at λ would amplify them by λ)."""
    U, s, Vt = np.linalg.svd(D, full_matrices=False)
    if s.max() == 0:
        return np.zeros_like(D)
    x = s / s.max()
    return (U * np.where(x > max(D.shape) * np.finfo(float).eps, f(x), 0.0)) @ Vt


def svc(lam):
    return lambda x: np.minimum(lam * x, 1.0)


def msign(x):
    """The exact polar factor's convention: singular values below 10⁻⁶ σ_max dropped."""
    return (x > TR.POLAR_RTOL).astype(float)


TRANSFORMS = {"sn": (TR.Clip(1.0), svc(1.0)), "svc4": (TR.Clip(4.0), svc(4.0)),
              "svc1e6": (TR.Clip(1e6), svc(1e6)), "msign": (TR.Msign(None), msign)}


@pytest.mark.parametrize("name", list(TRANSFORMS))
@pytest.mark.parametrize("shape, k", [((40, 40), 6), ((50, 30), 9), ((30, 50), 9),
                                      ((512, 512), 12)])
def test_every_route_is_the_svd_definition(name, shape, k):
    """Pᵀ K Q from the k × k core, the dense route on the smaller side's Gram and the rows of
    the limit all equal U f(Σ) Vᵀ of the dense D = Pᵀ C Q, to 1e-10."""
    T, f = TRANSFORMS[name]
    rng = np.random.default_rng(1)
    P, Q = rng.standard_normal((k, shape[0])), rng.standard_normal((k, shape[1]))
    C = np.diag(rng.uniform(0.1, 2.0, k))
    D = P.T @ C @ Q
    ref = by_svd(D, f)
    assert np.abs(P.T @ T.core(C, P @ P.T, Q @ Q.T) @ Q - ref).max() < 1e-10
    assert np.abs(T.dense(D) - ref).max() < 1e-10
    assert np.abs(T.dense(D.T) - ref.T).max() < 1e-10
    # rows: a tall D (n, m) whose rows are particles, T(D) = n^{-1/2} D R(DᵀD / n)
    tall = rng.standard_normal((shape[0], 5)) @ np.diag([3.0, 1.0, 0.5, 0.2, 0.05])
    n = len(tall)
    assert np.abs(tall @ T.rows(tall.T @ tall / n) / np.sqrt(n) - by_svd(tall, f)).max() < 1e-10


def test_clipping_spans_normalization_to_msign():
    """λ = 1 is Φ/‖Φ‖₂ to the last bit, λ = 10⁶ is the polar factor to 1e-10, and every
    transform has spectral norm one; a zero Φ moves nothing."""
    rng = np.random.default_rng(2)
    P, Q = rng.standard_normal((7, 60)), rng.standard_normal((7, 45))
    C = np.diag(rng.uniform(0.1, 2.0, 7))
    D, GP, GQ = P.T @ C @ Q, P @ P.T, Q @ Q.T
    sn = TR.Clip(1.0).core(C, GP, GQ)
    top = np.linalg.norm(D, 2)
    assert np.abs(P.T @ sn @ Q - D / top).max() < 1e-13
    assert np.array_equal(TR.Clip(1.0).dense(D), TR.Clip(1.0).dense(D))
    far = P.T @ TR.Clip(1e6).core(C, GP, GQ) @ Q
    assert np.abs(far - P.T @ TR.Msign(None).core(C, GP, GQ) @ Q).max() < 1e-10
    for T in (TR.Clip(1.0), TR.Clip(3.0), TR.Msign(None)):
        assert abs(np.linalg.norm(T.dense(D), 2) - 1.0) < 1e-12
        assert not np.any(T.dense(np.zeros((6, 4)))) and not np.any(T.rows(np.zeros((3, 3))))


# ---- finite networks: the low-rank update against a dense one written here ---------------------
class DenseSpectral(tp.SpectralUpdate):
    """A SpectralUpdate with a dense momentum buffer (or Adam's moments) and U f(Σ) Vᵀ by a
    full SVD of the dense n_out × n_in direction: the reference."""

    def finite_state(self, W, l, layers, backend):
        if self.vector_layers == "adam" and l in (0, layers - 1):
            return self.adam.finite_state(W, l, layers, backend)
        return (np.zeros_like(W), np.zeros_like(W))

    def finite_step(self, W, state, G, X, const, l, t, backend, rate=1.0):
        layers = len(const.lr)
        if self.vector_layers == "adam" and l in (0, layers - 1):
            return self.adam.finite_step(W, state, G, X, const, l, t, backend, rate)
        Gw = G.T @ X
        if self.low_rank:
            (Mb, _) = state
            Mb *= self.momentum
            Mb += Gw
            D = Gw + self.momentum * Mb if self.nesterov else Mb.copy()
        else:
            # Adam's own ψ (tests/test_optimizers.py checks it): an entry whose gradient is
            # of the size of ε has ψ with condition number about 1/ε, so a reference that
            # rounds differently would differ by far more than the transform's rounding
            D = self.base.direction(state, Gw * const.w_scale[l], t, np,
                                    self.base.eps * const.eps_scale[l])
        f = {"msign": msign, "sn": svc(1.0), "svc": svc(self.clip or 1.0)}[self.transform]
        W *= 1.0 - rate * self.shrinks(const.decay)[l]
        W -= rate * const.adam_lr[l] * const.w_scale[l] * M.shape_factor(l, layers, W.shape) \
            * by_svd(D, f)


SETTINGS = {
    "sn-nesterov": dict(base=tp.SGD(momentum=0.9, nesterov=True), transform="sn"),
    "sn-heavy-ball-decay": dict(base=tp.SGD(momentum=0.8), transform="sn", weight_decay=0.2),
    "svc-plain": dict(base=tp.SGD(), transform="svc", clip=4.0),
    "svc-adam-vectors": dict(base=tp.SGD(momentum=0.9), transform="svc", clip=2.0,
                             vector_layers="adam"),
    "msign-exact": dict(base=tp.SGD(momentum=0.5), transform="msign", ns_steps=None),
    "adam-sn": dict(base=tp.Adam(), transform="sn"),
    "adam-svc": dict(base=tp.Adam(betas=(0.8, 0.99)), transform="svc", clip=3.0),
    "adam-msign": dict(base=tp.Adam(), transform="msign", ns_steps=None, weight_decay=0.1),
}


@pytest.mark.parametrize("name", list(SETTINGS))
@pytest.mark.parametrize("n", [16, 256])
def test_finite_update_equals_the_dense_svd_update(name, n):
    """Every layer kind (input n × d, hidden n × n, readout d_out × n), six steps of batch 2
    under a schedule: the package's update (low-rank cores, or Adam's dense direction on
    the smaller side's Gram) against the SVD of the dense direction, to 1e-10 relative."""
    kw = SETTINGS[name]
    kind = "muon_adam" if kw.get("vector_layers") == "adam" else "muon"
    net = tp.MLP(tp.mup(3, optimizer=kind), 3, 2, phi="tanh")
    against_reference(net, tp.SpectralUpdate(**kw), DenseSpectral(**kw), n)


def test_one_step_has_the_spectral_norm_the_condition_asks():
    """From a zero buffer, ‖ΔW^l‖_* = η √(fan_out/fan_in) in every layer, for every transform
    and both bases (T(Φ) has spectral norm one)."""
    n, d, do = 200, 3, 2
    net = tp.MLP(tp.mup(2, optimizer="muon"), d, do, phi="tanh")
    for kw in SETTINGS.values():
        if kw.get("vector_layers") == "adam":
            continue
        opt = tp.SpectralUpdate(**{**kw, "weight_decay": 0.0})
        r = tp.Routine(lr=0.07, optimizer=opt, **{**N8_LONG, "batch_size": 2})
        P = Problem(net, r)
        nw = FiniteNetwork(net, n, r.lr, 0, numpy_backend(), np.float64, optimizer=opt)
        W0 = [w.copy() for w in nw.W]
        Xb, Yb = P.batch(0)
        hs, xs, f = nw.forward(Xb, 0)
        nw.step(hs, xs, P.loss.grad(f, Yb, np) / 2)
        for W, w0, (fo, fi) in zip(nw.W, W0, [(n, d), (n, n), (do, n)]):
            top = np.linalg.norm(W - w0, 2)
            assert abs(top / (0.07 * np.sqrt(fo / fi)) - 1.0) < 1e-9, (opt, fo, fi)


# ---- Muon is one of them -------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(momentum=0.9), dict(momentum=0.8, nesterov=False,
                                                           ns_steps=None, weight_decay=0.1)],
                         ids=["nesterov", "heavy-ball-polar-decay"])
def test_muon_is_the_msign_of_sgd_momentum_bit_for_bit(kw):
    """SpectralUpdate(SGD(momentum, nesterov), 'msign') against tp.Muon: identical weights
    in finite networks (L = 3, every layer kind) and identical limits (Monte Carlo L = 1, 2
    and the exact linear engine)."""
    base = tp.SGD(momentum=kw["momentum"], nesterov=kw.get("nesterov", True))
    spec = tp.SpectralUpdate(base, "msign", ns_steps=kw.get("ns_steps", 5),
                             weight_decay=kw.get("weight_decay", 0.0))
    muon = tp.Muon(**kw)
    for L, phi in ((3, "tanh"), (1, "tanh"), (2, "tanh"), (2, "id")):
        net = tp.MLP(tp.mup(L, optimizer="muon"), 3, 2, phi=phi)
        runs = [tp.Routine(lr=0.05, optimizer=o, **N8_LONG) for o in (spec, muon)]
        if L == 3:
            a, b = (tp.train_finite(net, r, 64, seed=1, keep_weights=True) for r in runs)
            assert np.array_equal(a.f_eval, b.f_eval)
            assert all(np.array_equal(x, y) for x, y in zip(a.weights.final, b.weights.final))
            continue
        a, b = (tp.simulate_limit(net, r, particles=1024, replicates=2, progress=False)
                for r in runs)
        assert a.meta["method"] == b.meta["method"]
        assert np.array_equal(a.f_eval, b.f_eval) and np.array_equal(a.f_eval_se, b.f_eval_se)


# ---- the classifier --------------------------------------------------------------------------------
def unscaled(L):
    """ΔW^l = −η T(Φ) in every layer, from μP's initialization (c = −a)."""
    mup = tp.mup(L)
    return tp.ABC(mup.a, mup.b, [-x for x in mup.a], optimizer="muon", name="unscaled")


def test_every_transform_follows_the_spectral_width_rule():
    """Every transform has spectral norm one, so each follows the 'muon' rule: μP-spectral
    learns features with every layer maximal; the unscaled update is refused with the
    readout's blow-up rate; a parametrization for another rule is refused."""
    for kw in SETTINGS.values():
        opt = tp.SpectralUpdate(**kw)
        assert opt.exponents == ("muon_adam" if kw.get("vector_layers") == "adam" else "muon")
    k = tp.mup(2, optimizer="muon").classify()
    assert k.regime == "feature_learning" and all(k.updated_maximally)
    bad = unscaled(2).classify()
    assert any("readout" in v and "n^(1/2)" in v for v in bad.violations), bad.violations
    with pytest.raises(tp.SpecError, match="optimizer='muon'"):
        Problem(tp.MLP(tp.mup(2), 2, 1),
                tp.Routine(lr=0.1, optimizer=tp.SpectralUpdate(tp.SGD(), "sn"), **D1))


@pytest.mark.slow
@pytest.mark.parametrize("param", [tp.mup(2, optimizer="muon"), unscaled(2)],
                         ids=["mup", "unscaled"])
@pytest.mark.parametrize("kw", [dict(transform="sn"), dict(transform="svc", clip=4.0)],
                         ids=["sn", "svc4"])
def test_coord_check_measures_the_predicted_exponents(param, kw):
    """Every update quantity's width exponent within 0.08 of the classifier's, for spectral
    normalization and clipping over SGD-momentum (η small enough that the unscaled
    readout, growing like √n η, stays below saturation)."""
    net = tp.MLP(param, 3, 2, phi="tanh")
    opt = tp.SpectralUpdate(tp.SGD(momentum=0.9, nesterov=True), **kw)
    r = tp.Routine(lr=0.01, optimizer=opt, **N8_LONG)
    cc = tp.coord_check(net, r, widths=[256, 512, 1024, 2048], seeds=3, executor="serial",
                        record=("stats",), progress=False)
    checked = [f for f in cc.fits if f.quantity in
               ("delta_h", "delta_x", "delta_W_x", "frobenius_ratio", "delta_f")]
    assert len(checked) == 33                       # t = 1, 2, 3
    for f in checked:
        assert abs(f.slope - f.predicted) < 0.08, (f.quantity, f.layer, f.slope, f.predicted)


# ---- the limit ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("L", [1, 2])
@pytest.mark.parametrize("kw", [dict(base=tp.SGD(momentum=0.9, nesterov=True), transform="sn"),
                                dict(base=tp.SGD(momentum=0.8), transform="svc", clip=4.0,
                                     weight_decay=0.3)], ids=["sn", "svc4-decay"])
def test_exact_linear_limit_matches_monte_carlo(L, kw):
    """φ = id: the exact engine against the Monte Carlo engine within the t bound of 8
    replicates (plain draws)."""
    net = tp.MLP(tp.mup(L, optimizer="muon"), 3, 2, phi="id")
    exact_against_monte_carlo(net, tp.Routine(lr=0.05, optimizer=tp.SpectralUpdate(**kw),
                                              **N8_LONG))


@pytest.mark.slow
@pytest.mark.parametrize("L", [1, 2, 3])
@pytest.mark.parametrize("kw", [dict(transform="sn"), dict(transform="svc", clip=4.0)],
                         ids=["sn", "svc4"])
def test_limit_matches_finite_networks_at_width_4096(L, kw):
    """tanh μP, SN and SVC over Nesterov momentum: 6 finite nets at width 4096 against the
    Monte Carlo limit, within the t bound of the combined standard error at every
    evaluated step (Welch's degrees of freedom); the other transform's limit (SVC for SN,
    SN for SVC) is outside that bound, so the test tells the transforms apart."""
    net = tp.MLP(tp.mup(L, optimizer="muon"), 3, 2, phi="tanh")
    X, Y = np.vstack([N8_LONG["X"]] * 2), np.vstack([N8_LONG["Y"]] * 2)
    opt = tp.SpectralUpdate(tp.SGD(momentum=0.9, nesterov=True), **kw)
    r = tp.Routine(X, Y, lr=0.05, batch_size=2, eval_inputs=N8_LONG["eval_inputs"],
                   optimizer=opt)
    lim = tp.simulate_limit(net, r, particles=2 ** 14, replicates=8, progress=False)
    F = np.array([tp.train_finite(net, r, 4096, seed=s, record=()).f_eval for s in range(6)])
    mean, se = F.mean(axis=0), F.std(axis=0, ddof=1) / np.sqrt(6)
    combined = np.hypot(se[1:], lim.f_eval_se[1:])
    q = t_quantile(welch_dof(se[1:], 5, lim.f_eval_se[1:], lim.status.se_dof))
    assert np.all(np.abs(mean[1:] - lim.f_eval[1:]) <= q * combined)
    swap = dict(transform="svc", clip=4.0) if kw["transform"] == "sn" else dict(transform="sn")
    rival = tp.Routine(X, Y, lr=0.05, batch_size=2, eval_inputs=N8_LONG["eval_inputs"],
                       optimizer=tp.SpectralUpdate(tp.SGD(momentum=0.9, nesterov=True), **swap))
    other = tp.simulate_limit(net, rival, particles=2 ** 14, replicates=8, progress=False)
    apart = np.hypot(se[-1], other.f_eval_se[-1])
    assert np.any(np.abs(mean[-1] - other.f_eval[-1]) > q[-1] * apart)


@pytest.mark.slow
@pytest.mark.parametrize("kw", [dict(transform="sn"), dict(transform="msign")],
                         ids=["sn", "msign-ns5"])
def test_one_hidden_layer_adam_base_limit_matches_finite_networks(kw):
    """With one hidden layer an Adam base has a limit (the vector layers' particles carry
    Adam's moments, T acts through the d × d Gram of ψ): 8 finite nets at width 4096
    against the Monte Carlo limit within the t bound at every evaluated step; the SGD
    base's limit is outside it."""
    net = tp.MLP(tp.mup(1, optimizer="muon"), 3, 2, phi="tanh")
    r = tp.Routine(lr=0.05, optimizer=tp.SpectralUpdate(tp.Adam(), **kw), **N8_LONG)
    lim = tp.simulate_limit(net, r, particles=2 ** 14, replicates=8, progress=False)
    assert lim.meta["method"] == "monte_carlo"
    F = np.array([tp.train_finite(net, r, 4096, seed=s, record=()).f_eval for s in range(8)])
    mean, se = F.mean(axis=0), F.std(axis=0, ddof=1) / np.sqrt(8)
    combined = np.hypot(se[1:], lim.f_eval_se[1:])
    q = t_quantile(welch_dof(se[1:], 7, lim.f_eval_se[1:], lim.status.se_dof))
    assert np.all(np.abs(mean[1:] - lim.f_eval[1:]) <= q * combined)
    sgd = tp.Routine(lr=0.05, optimizer=tp.SpectralUpdate(tp.SGD(), **kw), **N8_LONG)
    other = tp.simulate_limit(net, sgd, particles=2 ** 14, replicates=8, progress=False)
    assert np.any(np.abs(mean[-1] - other.f_eval[-1]) > q[-1] * np.hypot(se[-1],
                                                                         other.f_eval_se[-1]))


# ---- refusals --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    (dict(base=tp.Muon()), "base = Muon"), (dict(base="sgd"), "base = 'sgd'"),
    (dict(base=tp.SGD(weight_decay=0.1)), "decoupled"), (dict(transform="svd"), "transform"),
    (dict(transform="svc"), "clip is required"), (dict(transform="sn", clip=2.0), "clip = 2.0"),
    (dict(transform="svc", clip=0.5), "clip = 0.5"), (dict(transform="svc", clip="4"), "clip"),
    (dict(transform="svc", clip=float("inf")), "clip"),
    (dict(transform="sn", ns_steps=3), "ns_steps = 3"), (dict(ns_steps=0), "ns_steps"),
    (dict(vector_layers="muon"), "vector_layers"), (dict(weight_decay=-1.0), "weight_decay"),
])
def test_bad_settings_are_refused_by_name(kw, match):
    with pytest.raises(tp.SpecError, match=match):
        tp.SpectralUpdate(**kw)


def test_limits_refuse_what_does_not_exist():
    """An Adam base with hidden n × n matrices has no limit built (its finite networks
    train; with one hidden layer it has one); the kernel regime is refused as for Muon."""
    net = tp.MLP(tp.mup(2, optimizer="muon"), 2, 1)
    r = tp.Routine(lr=0.1, optimizer=tp.SpectralUpdate(tp.Adam(), "sn"), **D1)
    assert np.all(np.isfinite(tp.train_finite(net, r, 32, record=()).f_eval))
    with pytest.raises(tp.UnsupportedError, match="Adam base.*not built"):
        tp.simulate_limit(net, r)
    mup = tp.mup(2)
    kernel = tp.ABC(mup.a, mup.b, ["1/2", "1/2", 0], optimizer="muon")
    with pytest.raises(tp.UnsupportedError, match="spectral normalization of the buffer"):
        tp.simulate_limit(tp.MLP(kernel, 2, 1),
                          tp.Routine(lr=0.1, optimizer=tp.SpectralUpdate(tp.SGD(), "sn"), **D1))


def test_the_time_estimate_prices_the_dense_transform():
    """An Adam base transforms an n × n direction per hidden matrix and step (an SVD or
    Newton–Schulz, O(n³)): the finite estimate grows like n³ there, and like n² for an SGD
    base, whose transform acts through k × k cores."""
    from tp_limits.finite.cost import time_estimate
    net = tp.MLP(tp.mup(2, optimizer="muon"), 3, 2, phi="tanh")

    def ratio(opt):
        P = Problem(net, tp.Routine(lr=0.05, optimizer=opt, **N8_LONG))
        return time_estimate(P, 8192) / time_estimate(P, 4096)

    assert ratio(tp.SpectralUpdate(tp.Adam(), "sn")) > 7.0
    assert ratio(tp.SpectralUpdate(tp.Adam(), "msign")) > 7.0
    assert ratio(tp.SpectralUpdate(tp.SGD(momentum=0.9), "sn")) < 4.5


# ---- experiment files ------------------------------------------------------------------------------------
SPECTRAL_FILE = {"parametrization": {"preset": "mup", "L": 2, "optimizer": "muon"},
                 "data": {"generator": "teacher", "d_in": 3},
                 "routine": {"lr": 0.05, "steps": 3, "batch_size": 2,
                             "spectral_transform": "svc", "spectral_clip": 4,
                             "momentum": 0.9, "nesterov": True}}


def _file(parametrization=None, **routine):
    cfg = {k: dict(v) for k, v in SPECTRAL_FILE.items()}
    cfg["routine"].update(routine)
    cfg["routine"] = {k: v for k, v in cfg["routine"].items() if v is not None}
    cfg["parametrization"].update(parametrization or {})
    return cfg


def test_experiment_files_build_every_spectral_update():
    from tp_limits.experiment import build
    assert build(_file()).routine.optimizer == tp.SpectralUpdate(
        tp.SGD(momentum=0.9, nesterov=True), "svc", clip=4.0)
    adam_keys = dict(spectral_base="adam", momentum=None, nesterov=None, spectral_clip=None,
                     spectral_transform="sn", adam_betas=[0.8, 0.99], weight_decay=0.1)
    with pytest.raises(tp.TPError, match="(?s)Adam base.*limit = false"):
        build(_file(**adam_keys))                  # no limit, and nothing else to run
    sweep = {"lrs": [0.01, 0.02, 0.04], "limit": False, "widths": [32, 64]}
    adam = build({**_file(**adam_keys), "sweep": sweep})
    assert adam.routine.optimizer == tp.SpectralUpdate(tp.Adam(betas=(0.8, 0.99)), "sn",
                                                       weight_decay=0.1)
    assert "Adam base" in adam.no_limit and adam.estimate["sweep"] > 0
    hybrid = build(_file({"optimizer": "muon_adam"}, spectral_transform="msign",
                         spectral_clip=None, ns_steps="exact", adam_eps=1e-6))
    assert hybrid.routine.optimizer == tp.SpectralUpdate(
        tp.SGD(momentum=0.9, nesterov=True), "msign", ns_steps=None, vector_layers="adam",
        adam_eps=1e-6)
    plain = dict(spectral_transform=None, spectral_clip=None, momentum=None, nesterov=None)
    assert build(_file(**plain)).routine.optimizer == tp.Muon()
    assert build(_file({"optimizer": "muon_adam"}, **plain)).routine.optimizer == \
        tp.Muon(vector_layers="adam")


@pytest.mark.parametrize("routine, parametrization, match", [
    (dict(spectral_clip=0.5), None, "routine.spectral_clip = 0.5"),
    (dict(spectral_clip=None), None, "routine.spectral_clip is required"),
    (dict(spectral_transform="svd"), None, "routine.spectral_transform"),
    (dict(muon_momentum=0.9), None, "routine.muon_momentum does not apply"),
    (dict(spectral_base="adam"), None, "routine.momentum does not apply"),
    (dict(spectral_transform=None), None, "routine.spectral_clip needs"),
    (dict(momentum=1.5), None, "routine.momentum = 1.5"),
    (dict(), {"optimizer": "sgd"}, "parametrization.optimizer"),
])
def test_experiment_files_refuse_by_key(routine, parametrization, match):
    from tp_limits.experiment import build
    with pytest.raises(tp.TPError, match=match):
        build(_file(parametrization, **routine))


def test_a_file_without_a_limit_sweeps_its_finite_widths_and_run_refuses():
    """No engine computes the limit of an orthogonal hidden initialization: the file builds
    for a [sweep] with limit = false (its finite widths alone), and `run` refuses it with
    the reason, before any work."""
    from tp_limits.experiment import build
    from tp_limits.experiment.runner import require_limit
    cfg = _file(spectral_transform=None, spectral_clip=None, momentum=None, nesterov=None)
    cfg["model"] = {"init": "orthogonal"}
    with pytest.raises(tp.TPError, match="(?s)orthogonal.*limit = false"):
        build(cfg)
    exp = build({**cfg, "sweep": {"lrs": [0.01, 0.02, 0.04], "limit": False, "widths": [32]}})
    with pytest.raises(tp.TPError, match="(?s)orthogonal.*tp-limits sweep"):
        require_limit(exp)
    with pytest.raises(tp.TPError, match="limit = false"):
        build({**cfg, "sweep": {"lrs": [0.01, 0.02, 0.04]}})
