"""Routines in phases (tp_limits/spec/phases.py, docs/theory.md §10.10): pretrain, then
fine-tune some layers, in the finite networks and in every limit engine.

Exact engines are checked against each other and against a run that freezes a layer by
its rate multiplier (lr_mult = 0) to 1e-12; Monte Carlo comparisons use the Student-t
bound of conftest (probability 1e-4 of failing on a true difference of zero) with the
standard errors' own degrees of freedom.
"""
import numpy as np
import pytest
from conftest import N8_LONG, exact_against_monte_carlo, finite_mean, t_quantile, welch_dof

import tp_limits as tp
from tp_limits.errors import SpecError
from tp_limits.spec import Problem
from tp_limits.spec.phases import Clocks, Phase

E = N8_LONG["eval_inputs"]


def _tasks():
    """Two tasks on d = 3, d_out = 2 inputs: phase one's (the N8_LONG batches) and a second
    one with other inputs and targets."""
    rng = np.random.default_rng(3)
    X2 = rng.standard_normal((6, 3)) / np.sqrt(3)
    Y2 = np.column_stack([np.sin(X2.sum(axis=1)), np.cos(2 * X2[:, 0])])
    return (dict(X=N8_LONG["X"], Y=N8_LONG["Y"]), dict(X=X2, Y=Y2))


def _phased(lr1, lr2, train2, optimizer=None, train1=None):
    a, b = _tasks()
    pre = tp.Routine(lr=lr1, batch_size=2, optimizer=optimizer, train=train1, **a)
    ft = tp.Routine(lr=lr2, batch_size=2, optimizer=optimizer, train=train2, eval_inputs=E,
                    **b)
    return tp.Routine.phases(pre, ft)


# ---- the routine ----------------------------------------------------------------------------
def test_phases_join_data_rates_and_spans():
    r = _phased(0.4, [0.2, 0.1, 0.1], ("W3",))
    a, b = _tasks()
    assert r.steps == 6 and r.batch_size == 2
    assert np.array_equal(r.X, np.vstack([a["X"], b["X"]]))
    assert np.array_equal(r.Y, np.vstack([a["Y"], b["Y"]]))
    assert np.allclose(r.lr * r.rates, [0.4, 0.4, 0.4, 0.2, 0.1, 0.1])
    assert r.phase_spans == (Phase(0, 3, None), Phase(3, 6, ("W3",)))
    assert np.array_equal(r.eval_inputs, E)                  # the last phase's
    # with_lr (what lr_sweep calls) keeps the phases and their rates' shape
    s = r.with_lr(0.8)
    assert s.phase_spans == r.phase_spans and np.allclose(s.lr * s.rates, 2 * r.lr * r.rates)
    # a phase of phases keeps its inner spans
    inner = tp.Routine.phases(r, tp.Routine(lr=0.1, batch_size=2, train="W1", **a))
    assert inner.phase_spans[-1] == Phase(6, 9, ("W1",)) and inner.phase_spans[:2] == \
        r.phase_spans


@pytest.mark.filterwarnings("ignore:lr_sweep")
def test_a_swept_phase_is_the_one_with_lr_moves():
    """swept=2: with_lr (what lr_sweep calls) sets the fine-tuning phase's peak and keeps its
    shape and the pretraining's rates; a sweep of it runs each rate as that routine."""
    a, b = _tasks()
    pre = tp.Routine(lr=0.4, batch_size=2, **a)
    ft = tp.Routine(lr=[0.2, 0.1, 0.1], batch_size=2, train=("W3",), eval_inputs=E, **b)
    r = tp.Routine.phases(pre, ft, swept=2)
    s = r.with_lr(0.8)
    assert np.allclose(s.lr * s.rates, [0.4, 0.4, 0.4, 0.8, 0.4, 0.4])
    assert s.swept == (3, 6) and s.phase_spans == r.phase_spans
    assert np.allclose(r.with_lr(0.2).lr * r.with_lr(0.2).rates, r.lr * r.rates)
    with pytest.raises(SpecError, match="swept phase takes a number"):
        r.with_lr([0.1] * 6)
    with pytest.raises(SpecError, match="swept"):
        tp.Routine.phases(pre, ft, swept=3)
    net = tp.MLP(tp.mup(2), 3, 2, phi="tanh")
    sweep = tp.lr_sweep(net, r, [0.1, 0.4, 1.6], widths=[64], seeds=2, limit=False,
                        refine=0, executor="serial", progress=False)
    want = tp.train_finite(net, r.with_lr(1.6), 64, seed=0, record=()).loss[-1]
    got = [rec["value"] for rec in sweep.records if rec["lr"] == 1.6 and rec["seed"] == 0]
    assert got == [want]


def test_clocks_count_each_parameters_own_updates():
    c = Clocks.of((Phase(0, 2, ("W1",)), Phase(2, 5, None)), ("W1", "W2", "b1"), 5)
    assert c.counts["W1"].tolist() == [1, 2, 3, 4, 5]
    assert c.counts["W2"].tolist() == [0, 0, 1, 2, 3]        # a fresh optimizer state
    assert c.phased and c.trains("b", 0, 1) == 0
    assert not Clocks.of((Phase(0, 3, None),), ("W1", "W2"), 3).phased


@pytest.mark.parametrize("kw, match", [
    (dict(train=("W0",)), "W<l>"),
    (dict(train=(2,)), "W<l>"),
    (dict(train=("W1", "W1")), "twice"),
    (dict(train=3.5), "parameter names"),
    (dict(train=()), "trains nothing"),
])
def test_bad_train_is_refused_by_name(kw, match):
    with pytest.raises(SpecError, match=match):
        tp.Routine(lr=0.1, **N8_LONG, **kw)


def test_phases_must_share_loss_batch_and_optimizer():
    a, b = _tasks()
    pre = tp.Routine(lr=0.1, batch_size=2, **a)
    with pytest.raises(SpecError, match="phase 2 has batch_size = 1"):
        tp.Routine.phases(pre, tp.Routine(lr=0.1, **b))
    with pytest.raises(SpecError, match="phase 2 has optimizer"):
        tp.Routine.phases(pre, tp.Routine(lr=0.1, batch_size=2, optimizer=tp.SGD(0.5), **b))
    with pytest.raises(SpecError, match="phase 2 is a dict"):
        tp.Routine.phases(pre, b)
    with pytest.raises(SpecError, match="phase 2's inputs X have 2 columns"):
        tp.Routine.phases(pre, tp.Routine(b["X"][:, :2], b["Y"], lr=0.1, batch_size=2))
    with pytest.raises(SpecError, match="phase 2's targets Y"):
        tp.Routine.phases(pre, tp.Routine(b["X"], b["Y"][:, :1], lr=0.1, batch_size=2))


def test_a_parameter_the_network_lacks_is_refused_before_any_work():
    r = _phased(0.4, 0.2, ("W4",))
    net = tp.MLP(tp.mup(2), 3, 2, phi="tanh")
    for run in (lambda: tp.train_finite(net, r, 64), lambda: tp.simulate_limit(net, r)):
        with pytest.raises(SpecError, match="phase 2's train names 'W4'.*W1, W2, W3"):
            run()


def test_runs_record_their_phases():
    r = _phased(0.4, 0.2, ("W2", "W3"))
    tr = tp.train_finite(tp.MLP(tp.mup(2), 3, 2, phi="tanh"), r, 64, record=())
    assert tr.meta["phases"] == [{"steps": [0, 3], "train": None},
                                 {"steps": [3, 6], "train": ["W2", "W3"]}]


# ---- frozen for the whole run = a zero rate multiplier --------------------------------------
def _frozen_by_multiplier(phi, L, frozen, param=None):
    """(net, net with lr_mult 0 on ``frozen`` (1-based layers), routine training the rest)."""
    param = param or tp.mup(L)
    mult = [0.0 if l in frozen else 1.0 for l in range(1, L + 2)]
    net = tp.MLP(param, 3, 2, phi=phi)
    zeroed = tp.MLP(param, 3, 2, phi=phi, lr_mult=mult)
    keep = tuple(f"W{l}" for l in range(1, L + 2) if l not in frozen)
    return net, zeroed, tp.Routine(lr=0.3, train=keep, **N8_LONG)


@pytest.mark.parametrize("phi, L, frozen, kw", [
    ("tanh", 2, (2,), dict(particles=4096, replicates=2)),          # deep Monte Carlo
    ("tanh", 3, (1, 4), dict(particles=4096, replicates=2)),
    ("id", 3, (2,), {}),                                             # exact deep linear
    ("id", 1, (1,), {}),                                             # exact one hidden layer
], ids=["mc-hidden", "mc-input-readout", "exact-deep", "exact-one-hidden"])
def test_a_layer_frozen_throughout_equals_its_zero_rate_multiplier(phi, L, frozen, kw):
    """train= leaving layers out for the whole run moves the network as lr_mult = 0 on
    those layers does: finite nets bit for bit, the limits to 1e-12 (the one-hidden
    routine runs in the deep engine, its lr_mult twin in the fused one: both exact)."""
    net, zeroed, r = _frozen_by_multiplier(phi, L, frozen)
    plain = tp.Routine(lr=0.3, **N8_LONG)
    a = tp.train_finite(net, r, 128, seed=1, keep_weights=True)
    b = tp.train_finite(zeroed, plain, 128, seed=1, keep_weights=True)
    assert np.array_equal(a.f_eval, b.f_eval)
    for l in frozen:
        assert np.array_equal(a.weights.initial[l - 1], a.weights.final[l - 1])
    la, lb = tp.simulate_limit(net, r, **kw), tp.simulate_limit(zeroed, plain, **kw)
    assert np.abs(la.f_eval - lb.f_eval).max() < 1e-12
    assert np.abs(la.f_eval - tp.simulate_limit(net, plain, **kw).f_eval).max() > 1e-3


def test_adam_frozen_throughout_equals_its_zero_rate_multiplier():
    """Deep Adam (partner particles) with the hidden matrix frozen: as lr_mult = 0."""
    param = tp.mup(2, optimizer="adam")
    mult = [1.0, 0.0, 1.0]
    r = tp.Routine(lr=0.02, train=("W1", "W3"), optimizer=tp.Adam(), **N8_LONG)
    plain = tp.Routine(lr=0.02, optimizer=tp.Adam(), **N8_LONG)
    kw = dict(particles=2048, replicates=2, partners=64)
    a = tp.simulate_limit(tp.MLP(param, 3, 2, phi="tanh"), r, **kw)
    b = tp.simulate_limit(tp.MLP(param, 3, 2, phi="tanh", lr_mult=mult), plain, **kw)
    assert np.abs(a.f_eval - b.f_eval).max() < 1e-12


# ---- what a phase boundary does -------------------------------------------------------------
def test_a_parameter_first_trained_in_phase_two_starts_a_fresh_adam():
    """W2 frozen for three steps, then trained: its first update is Adam's first step, whose
    bias-corrected ratio m̂/√v̂ is ±1 in every entry, so |ΔW| is the layer's rate in every
    entry (up to ε); a state that had run through the frozen steps would not be."""
    net = tp.MLP(tp.mup(2, optimizer="adam"), 3, 2, phi="tanh")
    opt = tp.Adam(eps=1e-12)
    r = _phased(0.01, 0.01, None, optimizer=opt, train1=("W1", "W3"))
    n = 64
    short = tp.Routine.phases(*[tp.Routine(lr=0.01, batch_size=2, optimizer=opt, train=t,
                                           X=r.X[rows], Y=r.Y[rows], eval_inputs=E)
                                for t, rows in ((("W1", "W3"), slice(0, 6)),
                                                (None, slice(6, 8)))])
    before = tp.train_finite(net, tp.Routine(lr=0.01, batch_size=2, optimizer=opt,
                                             train=("W1", "W3"), X=r.X[:6], Y=r.Y[:6],
                                             eval_inputs=E), n, keep_weights=True)
    after = tp.train_finite(net, short, n, keep_weights=True)
    W_before, W_after = before.weights.final[1], after.weights.final[1]
    assert np.array_equal(W_before, after.weights.initial[1])            # frozen till then
    a, _, c = (tuple(float(x) for x in v) for v in net.param._fractions)
    rate = 0.01 * n ** -c[1]
    step = np.abs(W_after - W_before) / n ** -a[1]
    assert np.allclose(step, rate, rtol=1e-6), (step.min(), step.max(), rate)


def test_kernel_regime_in_phases_is_descent_on_each_phases_kernel():
    """NTP, f_0 = 0: phase one descends on the NTK of every layer, phase two on the readout's
    component alone (tp.ntk(layers=(3,))), written out here to 1e-12."""
    net = tp.MLP(tp.ntp(2), 3, 2, phi="relu")
    r = _phased(0.5, 0.3, ("W3",))
    lim = tp.simulate_limit(net, r, f0="zero")
    P = Problem(net, r)
    f_tr = np.zeros((len(r.X), 2))
    f_ev = np.zeros((len(E), 2))
    for t in range(P.T):
        rows = r.rows(t)
        Xb, Yb = P.batch(t)
        chi = P.loss.grad(f_tr[rows], Yb, np) / 2
        layers = None if t < 3 else (3,)
        lr = 0.5 if t < 3 else 0.3
        f_ev = f_ev - lr * tp.ntk(net, E, Xb, layers=layers) @ chi
        f_tr = f_tr - lr * tp.ntk(net, r.X, Xb, layers=layers) @ chi
        assert np.abs(lim.f_eval[t + 1] - f_ev).max() < 1e-12


def test_exact_and_monte_carlo_limits_agree_in_phases():
    """φ = id, L = 2, momentum: pretrain everything, fine-tune W2 alone; the Monte Carlo
    engine within the t bound of the exact one at every step."""
    net = tp.MLP(tp.mup(2), 3, 2, phi="id")
    r = _phased(0.3, 0.2, ("W2",), optimizer=tp.SGD(momentum=0.5))
    exact = tp.simulate_limit(net, r)
    mc = tp.simulate_limit(net, r, method="monte_carlo", particles=2 ** 14, replicates=8)
    q = t_quantile(mc.status.se_dof)
    assert np.all(np.abs(mc.f_eval - exact.f_eval) <= q * mc.f_eval_se)
    assert np.abs(exact.f_eval - tp.simulate_limit(
        net, r.with_lr(r.lr)).f_eval).max() == 0.0                      # with_lr kept them


@pytest.mark.parametrize("phi, kw", [("tanh", dict(particles=4096, replicates=2)),
                                     ("id", {})], ids=["monte-carlo", "exact"])
def test_muon_frozen_throughout_equals_its_zero_rate_multiplier(phi, kw):
    """Muon's hidden matrix left out of train moves the network as lr_mult = 0 does, in the
    Monte Carlo (msign pairs) and exact engines, to 1e-12."""
    param = tp.mup(2, optimizer="muon")
    r = tp.Routine(lr=0.05, train=("W1", "W3"), optimizer=tp.Muon(), **N8_LONG)
    plain = tp.Routine(lr=0.05, optimizer=tp.Muon(), **N8_LONG)
    net = tp.MLP(param, 3, 2, phi=phi)
    a = tp.simulate_limit(net, r, **kw)
    b = tp.simulate_limit(tp.MLP(param, 3, 2, phi=phi, lr_mult=[1.0, 0.0, 1.0]), plain, **kw)
    assert np.abs(a.f_eval - b.f_eval).max() < 1e-12
    assert np.abs(a.f_eval - tp.simulate_limit(net, plain, **kw).f_eval).max() > 1e-3


@pytest.mark.parametrize("momentum", [0.9, 0.0])
def test_muon_in_phases_finite_networks_match_the_exact_limit(momentum):
    """φ = id, Muon: W2 frozen while the rest pretrains, then trained alone from a fresh
    buffer (its pairs weighted by its own updates).  Ten nets at width 4096 within the t
    bound of their standard error of the exact limit (which Monte Carlo matches within its
    own); the limit of the same routine without phases lies outside it."""
    net = tp.MLP(tp.mup(2, optimizer="muon"), 3, 2, phi="id")
    opt = tp.Muon(momentum=momentum, nesterov=False) if momentum == 0 else tp.Muon()
    r = _phased(0.05, 0.05, ("W2",), optimizer=opt, train1=("W1", "W3"))
    exact, _, _ = exact_against_monte_carlo(net, r)
    mean, se = finite_mean(net, r, 4096, 10)
    q = t_quantile(9)
    assert np.all(np.abs(mean[1:] - exact.f_eval[1:]) <= q * se[1:])
    every = tp.simulate_limit(net, _phased(0.05, 0.05, None, optimizer=opt))
    assert np.any(np.abs(every.f_eval[-1] - exact.f_eval[-1]) > q * se[-1])


@pytest.mark.parametrize("opt", [tp.SGD(momentum=0.8, weight_decay=0.1),
                                 tp.Adam(weight_decay=0.3)], ids=["sgd", "adamw"])
def test_to_torch_switching_requires_grad_trains_as_train_finite(opt):
    """The semantics of a frozen step, checked against torch itself: a loop that turns
    requires_grad off for the frozen weights under one optimizer (torch then skips them:
    no step, no decay, no state) gives train_finite's outputs to 1e-12, W1 frozen first
    and trained from a fresh state in phase two."""
    pytest.importorskip("torch")
    net = tp.MLP(tp.mup(2, optimizer=opt.exponents), 3, 2, phi="tanh")
    lr = 0.02 if opt.name == "adam" else 0.5
    r = _phased(lr, [0.5 * lr, lr, lr], None, optimizer=opt, train1=("W2", "W3"))
    got = tp.to_torch(net, 64, seed=2, routine=r).train(r, net)
    want = tp.train_finite(net, r, 64, seed=2).f_eval
    assert np.abs(got - want).max() < 1e-12
    unphased = _phased(lr, [0.5 * lr, lr, lr], None, optimizer=opt)      # W1 never frozen
    assert np.abs(tp.train_finite(net, unphased, 64, seed=2).f_eval - want).max() > 1e-6


# ---- finite networks converge to the limit in phases ----------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("param, opt, lrs, train2, kw", [
    (tp.mup(2), tp.SGD(momentum=0.5), (0.5, 0.4), ("W2",), dict(particles=2 ** 14)),
    (tp.mup(2, optimizer="adam"), tp.Adam(), (0.03, 0.1), ("W2", "W3"),
     dict(particles=4000, partners=256)),
], ids=["momentum-W2", "adam-W2-W3"])
def test_finite_networks_match_the_limit_in_phases(param, opt, lrs, train2, kw):
    """Pretrain every layer on one task, fine-tune some on another: 6 finite nets at width
    4096 within the t bound of the Monte Carlo limit at the last step (Welch's dof); the
    limit that trains every layer in phase two lies outside that bound."""
    net = tp.MLP(param, 3, 2, phi="tanh")
    r = _phased(*lrs, train2, optimizer=opt)
    lim = tp.simulate_limit(net, r, replicates=8, progress=False, **kw)
    mean, se = finite_mean(net, r, 4096, 6)
    combined = np.hypot(se[-1], lim.f_eval_se[-1])
    q = t_quantile(welch_dof(se[-1], 5, lim.f_eval_se[-1], lim.status.se_dof))
    assert np.all(np.abs(mean[-1] - lim.f_eval[-1]) <= q * combined), (mean[-1], lim.f_eval[-1])
    every = tp.simulate_limit(net, _phased(*lrs, None, optimizer=opt), replicates=8,
                              progress=False, **kw)
    assert np.any(np.abs(every.f_eval[-1] - lim.f_eval[-1]) > q * combined)


# ---- experiment files -----------------------------------------------------------------------
FILE = {
    "parametrization": {"preset": "mup", "L": 2},
    "model": {"phi": "tanh"},
    "data": {"generator": "teacher", "d_in": 2, "n_eval": 3},
    "routine": {"lr": 0.5, "steps": 4},
    "limit": {"particles": 1024, "replicates": 2},
    "finite": {"enabled": False},
}


def test_an_experiment_file_fine_tunes_after_its_routine():
    """[finetune] adds a phase: the generator's task at data.seed + 1, its rate, steps and
    train; the run equals train_finite on Routine.phases built by hand."""
    from tp_limits.experiment.data import teacher
    from tp_limits.experiment.runner import build
    exp = build({**FILE, "finetune": {"train": ["W3"], "lr": 0.2, "steps": 3}})
    r = exp.routine
    assert r.phase_spans == (Phase(0, 4, None), Phase(4, 7, ("W3",)))
    X1, Y1, _, _ = teacher(4, 2, 1, 3, 0.0, 0)
    X2, Y2, E2, Ye2 = teacher(3, 2, 1, 3, 0.0, 1)
    hand = tp.Routine.phases(tp.Routine(X1, Y1, lr=0.5),
                             tp.Routine(X2, Y2, lr=0.2, train="W3", eval_inputs=E2,
                                        eval_targets=Ye2))
    a = tp.train_finite(exp.net, r, 64, record=())
    b = tp.train_finite(exp.net, hand, 64, record=())
    assert np.array_equal(a.f_eval, b.f_eval) and np.array_equal(a.loss, b.loss)
    assert r.swept is None
    swept = build({**FILE, "finetune": {"train": ["W3"], "lr": 0.2, "steps": 3, "swept": True}})
    assert swept.routine.swept == (4, 7)


@pytest.mark.parametrize("finetune, match", [
    ({"train": ["W9"]}, "finetune.train: .*'W9'"),
    ({"lr": 0.2}, "finetune.train is required"),
    ({"train": ["W3"], "X": [[1.0, 0.0]], "Y": [[1.0]]}, "leave out X"),
    ({"train": ["W3"], "lr": -1.0}, "finetune.lr"),
    ({"train": ["W3"], "steps": 0}, "finetune.steps"),
    ({"train": "W3"}, "finetune.train must be a list of strings"),
])
def test_bad_finetune_keys_are_named(finetune, match):
    from tp_limits.experiment.runner import build
    from tp_limits.experiment.schema import ExperimentError
    with pytest.raises(ExperimentError, match=match):
        build({**FILE, "finetune": finetune})


def test_quadrature_names_why_a_phased_one_hidden_network_cannot_use_it():
    net = tp.MLP(tp.mup(1), 3, 2, phi="tanh")
    with pytest.raises(SpecError, match="a routine in phases"):
        tp.simulate_limit(net, _phased(0.3, 0.2, ("W2",)), method="quadrature")
    with pytest.raises(SpecError, match="L = 2 hidden layers"):
        tp.simulate_limit(tp.MLP(tp.mup(2), 3, 2), _phased(0.3, 0.2, ("W2",)),
                          method="quadrature")


def test_biases_follow_the_phases():
    """φ = id, biases on every layer; phase two trains W2 and b2 alone.  Finite: b1 and b3
    end where phase one left them, b2 moves on.  Limit: the exact engine (bias
    coefficients) and the Monte Carlo engine (bias particles, the readout's β) within the t
    bound at every step."""
    net = tp.MLP(tp.mup(2), 3, 2, phi="id", bias=tp.Bias(sigma=0.5))
    r = _phased(0.2, 0.2, ("W2", "b2"))
    one = tp.Routine(lr=0.2, batch_size=2, **_tasks()[0])
    full = tp.train_finite(net, r, 128, seed=3, keep_weights=True)
    first = tp.train_finite(net, one, 128, seed=3, keep_weights=True)
    for l in (0, 2):
        assert np.array_equal(full.weights.bias_final[l], first.weights.bias_final[l])
    assert not np.array_equal(full.weights.bias_final[1], first.weights.bias_final[1])
    exact = tp.simulate_limit(net, r)
    mc = tp.simulate_limit(net, r, method="monte_carlo", particles=2 ** 13, replicates=8)
    q = t_quantile(mc.status.se_dof)
    assert np.all(np.abs(mc.f_eval[1:] - exact.f_eval[1:]) <= q * mc.f_eval_se[1:])
    every = tp.simulate_limit(net, _phased(0.2, 0.2, None))
    assert np.abs(every.f_eval[-1] - exact.f_eval[-1]).max() > 1e-3
