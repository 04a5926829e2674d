"""A sweep of bad inputs across the Python API and the command line.

Every case must fail with the library's own error (a ``tp.TPError``; on the
command line, a short message and exit status 2) *before any work starts*:
the engines' step loop is booby-trapped, so a case that began training or
simulating fails the test even if it errs later.
"""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import D1, d1

import tp_limits as tp
from tp_limits.cli import main
from tp_limits.engine.steps import StepLoop
from tp_limits.experiment import build

MUP1, MUP2 = tp.MLP(tp.mup(1), 2, 1), tp.MLP(tp.mup(2), 2, 1)
NTP2 = tp.MLP(tp.ntp(2), 2, 1, phi="relu")
X3 = D1["eval_inputs"]
NAN = float("nan")
INF = float("inf")


@pytest.fixture(autouse=True)
def no_work(monkeypatch):
    def trap(self):
        raise AssertionError("work started before the bad input was refused")
        yield  # pragma: no cover
    monkeypatch.setattr(StepLoop, "__iter__", trap)


def closed_pool():
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    return pool


CASES = {}


def case(name, fn):
    assert name not in CASES, name
    CASES[name] = fn


# ---- parametrizations ----------------------------------------------------------------
for i, (a, b, c, opt) in enumerate([
        ([0], [0], 0, "sgd"), ([0, 0], [0], 0, "sgd"), ([0, 0], [0, 0], [0], "sgd"),
        ([0, 0], [0, 0], 0, "lion"), ([0, True], [0, 0], 0, "sgd"), ([0, NAN], [0, 0], 0, "sgd"),
        ([0, "x y"], [0, 0], 0, "sgd"), ([0, "1//2"], [0, 0], 0, "sgd"),
        ([0, "oo"], [0, 0], 0, "sgd"), ([0, 0], ["oo", 0], 0, "sgd"), ([0, 0], [0, 0], "oo", "sgd"),
        ("00", [0, 0], 0, "sgd"), (5, [0, 0], 0, "sgd"), ([0, 0], [0, 0], [0, 0, 0], "sgd"),
        ([0, 0], [0, 0], None, "sgd"), ([0, 0], [0, 0], 0, None), ([0, 1j], [0, 0], 0, "sgd"),
        ([0, "1/0"], [0, 0], 0, "sgd"), ([0, "2 %3"], [0, 0], 0, "sgd"),
        ([0] * 1002, [0] * 1002, 0, "sgd"), ([0, [1]], [0, 0], 0, "sgd"),
        ([0, -INF], [0, 0], 0, "sgd")]):
    case(f"ABC-{i}", lambda a=a, b=b, c=c, opt=opt: tp.ABC(a, b, c, optimizer=opt))
for i, fn in enumerate([
        lambda: tp.mup(0), lambda: tp.mup(-1), lambda: tp.mup(1.5), lambda: tp.mup("2"),
        lambda: tp.mup(True), lambda: tp.mup(10 ** 7), lambda: tp.mup(2, form="b"),
        lambda: tp.mup(2, optimizer="lion"), lambda: tp.mfp(2), lambda: tp.ntp(0),
        lambda: tp.sp(2, c="1 +"), lambda: tp.sp(2, c=NAN), lambda: tp.ntp(2, c=[0, 1])]):
    case(f"preset-{i}", fn)
SYM = tp.sp(2, c="c")
for i, fn in enumerate([
        lambda: SYM.classify(), lambda: tp.mup(2).shift([1, 2]), lambda: tp.mup(2).shift("x y"),
        lambda: tp.mup(2).equivalent(5), lambda: tp.mup(2).equivalent("mup"),
        lambda: tp.mup(2).subs(d=1), lambda: tp.table([]), lambda: tp.table(5),
        lambda: tp.table([tp.mup(1), "sp"]), lambda: tp.table([SYM]),
        lambda: tp.mup(2).predicted_exponents(t=-1),
        lambda: tp.phase_diagram(tp.sp(1), x="d", y="b_2"),
        lambda: tp.phase_diagram(tp.sp(1), x="b_7", y="b_2"),
        lambda: tp.phase_diagram(tp.sp(1), x="c", y="c"),
        lambda: tp.phase_diagram(tp.sp(1), step="1/1000"),
        lambda: tp.phase_diagram(tp.sp(1), step=0),
        lambda: tp.phase_diagram(tp.sp(1), x_range=(2, -2)),
        lambda: tp.phase_diagram(tp.sp(1), x_range=("a", "b")),
        lambda: tp.spectral.parametrization([3]), lambda: tp.spectral.parametrization([3, 0, 1]),
        lambda: tp.spectral.parametrization([3, 8, 1], optimizer="lion"),
        lambda: tp.spectral.parametrization("3, 8, 1")]):
    case(f"symbolic-{i}", fn)

# ---- the problem description --------------------------------------------------------
for i, kw in enumerate([
        dict(param="mup"), dict(param=SYM), dict(d_in=0), dict(d_in=-1), dict(d_in=2.5),
        dict(d_in=True), dict(d_out=0), dict(d_out="1"), dict(phi="tahn"), dict(phi=None),
        dict(phi=np.tanh), dict(sigma=[1, 2]), dict(sigma=-1), dict(sigma=0), dict(sigma=NAN),
        dict(sigma=INF), dict(sigma="1"), dict(sigma=[1, "a", 2]), dict(lr_mult=[1, 2, 3, 4]),
        dict(lr_mult=0), dict(lr_mult=-2), dict(readout_multiplier=0),
        dict(readout_multiplier=NAN), dict(readout_multiplier="2"), dict(output_scale=0),
        dict(output_scale=-1), dict(output_scale=INF), dict(sigma=True)]):
    args = dict(param=tp.mup(2), d_in=2)
    args.update(kw)
    case(f"MLP-{i}", lambda args=args: tp.MLP(**args))
GOOD = dict(X=D1["X"], Y=D1["Y"], lr=0.5)
for i, kw in enumerate([
        dict(X=[1.0, 0.0, 1.0]), dict(X=np.zeros((3, 2, 1))), dict(X=np.zeros((0, 2))),
        dict(X=[[1.0, NAN], [0, 1], [1, 0]]), dict(X=[[1.0, INF], [0, 1], [1, 0]]),
        dict(X=[["a", "b"], ["c", "d"], ["e", "f"]]), dict(X=[[1.0, 0.0], [1.0], [0.0, 1.0]]),
        dict(Y=D1["Y"][:2]), dict(Y=[[NAN], [1], [1]]), dict(Y=np.zeros((3, 1, 1))),
        dict(lr=0), dict(lr=-0.1), dict(lr=NAN), dict(lr=INF), dict(lr="fast"), dict(lr=None),
        dict(loss="hinge"), dict(loss=None), dict(batch_size=0), dict(batch_size=2.5),
        dict(batch_size=2), dict(steps=0), dict(steps=4), dict(steps=1.5),
        dict(eval_inputs=np.zeros((2, 3))), dict(eval_inputs=np.zeros((0, 2))),
        dict(eval_inputs=[[NAN, 0.0]]), dict(eval_inputs=[1.0, 2.0]),
        dict(loss="xent", Y=np.array([0, -1, 1])), dict(loss="xent", Y=[[0.5, 0.5]] * 3),
        dict(loss="xent", Y=[[1.0], [2.0], [0.0]])]):
    args = dict(GOOD)
    args.update(kw)
    case(f"Routine-{i}", lambda args=args: tp.Routine(**args))
case("kernel_points-not-routine", lambda: tp.kernel_points(D1["X"]))
case("mismatch-d_in", lambda: tp.train_finite(tp.MLP(tp.mup(1), 3, 1), d1(), 16))
case("mismatch-d_out", lambda: tp.train_finite(tp.MLP(tp.mup(1), 2, 2), d1(), 16))
case("mismatch-labels", lambda: tp.train_finite(
    tp.MLP(tp.mup(1), 2, 2), tp.Routine(D1["X"], np.array([0, 2, 1]), lr=0.5, loss="xent"), 16))

# ---- the finite engine ----------------------------------------------------------------
for i, kw in enumerate([
        dict(width=0), dict(width=-4), dict(width=2.5), dict(width="64"), dict(width=True),
        dict(width=10 ** 7), dict(seed=-1), dict(seed=1.5), dict(seed="0"), dict(seed=2 ** 64),
        dict(backend="tpu"), dict(backend=None), dict(dtype=np.int32), dict(dtype=np.float16),
        dict(dtype="half"), dict(backprop="random"),
        dict(record=None), dict(record="stats"), dict(record=("everything",)),
        dict(record=("stats", 3)), dict(on_divergence="ignore"), dict(on_divergence=True),
        dict(progress="yes"), dict(progress=None),
        dict(divergence_bound=0), dict(divergence_bound=-1), dict(divergence_bound="big"),
        dict(divergence_bound=INF)]):
    args = dict(width=16)
    args.update(kw)
    case(f"train_finite-{i}", lambda args=args: tp.train_finite(MUP2, d1(), **args))
# ---- optimizers (width-free hyperparameters, checked against the parametrization) ------
for i, fn in enumerate([
        lambda: tp.SGD(momentum=-0.1), lambda: tp.SGD(momentum=1.0), lambda: tp.SGD(momentum="high"),
        lambda: tp.SGD(momentum=NAN), lambda: tp.SGD(weight_decay=-1e-4),
        lambda: tp.SGD(weight_decay=INF), lambda: tp.SGD(weight_decay=True),
        lambda: tp.Adam(betas=(0.9, 1.0)), lambda: tp.Adam(betas=(-0.1, 0.9)),
        lambda: tp.Adam(betas=0.9), lambda: tp.Adam(betas=("a", "b")),
        lambda: tp.Adam(betas=(0.9, 0.99, 0.9)), lambda: tp.Adam(eps=-1e-8),
        lambda: tp.Adam(eps=NAN), lambda: tp.Adam(eps="small"), lambda: tp.Adam(weight_decay=-1),
        lambda: tp.Routine(lr=0.5, optimizer="adam", **D1),
        lambda: tp.Routine(lr=0.5, optimizer=tp.SGD, **D1),
        lambda: tp.train_finite(MUP2, tp.Routine(lr=0.5, optimizer=tp.Adam(), **D1), 16),
        lambda: tp.simulate_limit(MUP2, tp.Routine(lr=0.5, optimizer=tp.Adam(), **D1)),
        lambda: tp.train_finite(tp.MLP(tp.mup(2, optimizer="adam"), 2, 1),
                                tp.Routine(lr=0.5, optimizer=tp.SGD(momentum=0.9), **D1), 16)]):
    case(f"optimizer-{i}", fn)
case("train_finite-decoupled-L1", lambda: tp.train_finite(MUP1, d1(), 16, backprop="decoupled"))
case("train_finite-net", lambda: tp.train_finite("mup", d1(), 16))
case("train_finite-routine", lambda: tp.train_finite(MUP1, D1, 16))

# ---- the limit engines --------------------------------------------------------------
for i, kw in enumerate([
        dict(particles=0), dict(particles=1), dict(particles=2.5), dict(particles="many"),
        dict(particles=10 ** 13), dict(seed=-1), dict(seed="0"), dict(replicates=0),
        dict(replicates=1.5), dict(replicates=10 ** 6), dict(method="magic"),
        dict(method="exact"), dict(eval_every=0), dict(eval_every=-1), dict(progress="yes"),
        dict(dtype=np.float16), dict(dtype=int), dict(record=("stats", "spectral")),
        dict(record=None), dict(record="stats"), dict(kernel="cuda"), dict(kernel="opencl"),
        dict(backend="tpu"), dict(random="device"), dict(kernel="cuda", backend="numpy"),
        dict(sampler="sobol"), dict(sampler="qmc", replicates=1),
        dict(f0="random"), dict(samples=0), dict(backprop="partial"), dict(backprop="decoupled"),
        dict(on_divergence="ignore"), dict(zdot="adjoint"), dict(zdot="tangent", method="exact"),
        dict(workers=0), dict(workers=-2), dict(divergence_bound=-1), dict(divergence_bound=0),
        dict(method="quadrature", particles=10 ** 3), dict(replicates=None),
        dict(method="quadrature", particles=1)]):
    case(f"simulate_limit-1-{i}", lambda kw=kw: tp.simulate_limit(MUP1, d1(), **kw))
for i, kw in enumerate([
        dict(method="quadrature"), dict(particles=10 ** 12), dict(kernel="cuda"),
        dict(zdot="adjoint"), dict(dtype=np.float16), dict(workers=0),
        dict(particles=10 ** 10, zdot="tangent"), dict(record=("spectral",)),
        dict(eval_every=2.5), dict(seed=None)]):
    case(f"simulate_limit-2-{i}", lambda kw=kw: tp.simulate_limit(MUP2, d1(), **kw))
for i, (net, kw) in enumerate([
        (tp.MLP(tp.mup(3), 2, 1, phi="relu"), dict(zdot="tangent")),
        (tp.MLP(tp.sp(2), 2, 1), {}), (tp.MLP(tp.sp(1), 2, 1), {}),
        (tp.MLP(tp.ntp(2, c="-1/2"), 2, 1), {}),
        (tp.MLP(tp.mup(2, optimizer="adam"), 2, 1), dict(partners=10 ** 6)),
        (tp.MLP(tp.mup(1), 2, 1), dict(method="quadrature", particles=20 ** 3)),
        (tp.MLP(tp.mup(1), 3, 2), dict(method="quadrature")),
        (NTP2, dict(f0=np.zeros((2, 1)))), (NTP2, dict(f0=np.full((3, 1), NAN))),
        (NTP2, dict(f0=np.zeros((3, 2)))), (NTP2, dict(f0=5)), (NTP2, dict(f0=None)),
        (NTP2, dict(backprop="decoupled")), (NTP2, dict(samples=-1))]):
    case(f"simulate_limit-3-{i}", lambda net=net, kw=kw: tp.simulate_limit(net, d1(), **kw))
case("simulate_limit-mismatch", lambda: tp.simulate_limit(tp.MLP(tp.mup(1), 3, 1), d1()))
case("simulate_limit-net", lambda: tp.simulate_limit(None, d1()))

# options that do not apply are refused, not ignored
ADAM1 = tp.MLP(tp.mup(1, optimizer="adam"), 2, 1)
for i, (net, kw, routine) in enumerate([
        (ADAM1, dict(partners=8), lambda: d1(optimizer=tp.Adam())),
        (ADAM1, dict(debias_partners=False), lambda: d1(optimizer=tp.Adam())),
        (MUP1, dict(zdot="tangent"), d1), (MUP2, dict(debias_partners=False), d1),
        (tp.MLP(tp.mup(2), 2, 1, phi="id"), dict(zdot="tangent"), d1),
        (NTP2, dict(method="monte_carlo"), d1), (NTP2, dict(method="quadrature"), d1),
        (NTP2, dict(zdot="tangent"), d1),
        # a feature-learning limit starts from f_0 = 0: the kernel regime's f0 and samples
        (MUP1, dict(f0=np.zeros((3, 1))), d1), (MUP2, dict(samples=4), d1),
        (tp.MLP(tp.mup(2), 2, 1, phi="id"), dict(f0=np.zeros((3, 1))), d1)]):
    case(f"simulate_limit-inapplicable-{i}",
         lambda net=net, kw=kw, routine=routine: tp.simulate_limit(net, routine(), **kw))
FINITE_AS_LIMIT = tp.Trajectory(f_eval=np.zeros((4, 3, 1)), f_train=np.zeros((3, 1, 1)),
                                loss=np.zeros(3), meta={"engine": "finite", "width": 64})
case("convergence-finite-limit",
     lambda: tp.convergence(MUP1, d1(), [32, 64], seeds=2, limit=FINITE_AS_LIMIT))
case("digits-no-training-split",
     lambda: tp.datasets.digits(classes=2, test_fraction=0.9999))
case("digits-batch-beyond-the-data",
     lambda: tp.datasets.digits(classes=2).routine(lr=0.1, batch_size=10 ** 6))
def _many_eval_inputs():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 2))
    return tp.Routine(X, X[:, :1], lr=0.1, eval_inputs=rng.standard_normal((60_000, 2)))


# the (T+1)·E·E feature kernels the statistics would record do not fit: refused up front
case("train_finite-feature-kernel-memory", lambda: tp.train_finite(MUP2, _many_eval_inputs(), 64))
def _long_deep_run(**kw):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 2))        # batch 1 and 64 eval inputs: fits in ~3 GB
    r = tp.Routine(X, X[:, :1], lr=0.1, batch_size=1, eval_inputs=X[:64])
    return tp.simulate_limit(tp.MLP(tp.mup(2), 2, 1), r, particles=30_000, dtype=np.float32,
                             replicates=1, **kw)


# a deep Monte Carlo run of 4000 steps: estimated beyond the default time budget (T²)
case("simulate_limit-deep-beyond-time-budget", _long_deep_run)
case("simulate_limit-bad-time-budget",
     lambda: tp.simulate_limit(MUP2, d1(), time_budget=-1.0))
case("train_finite-bad-time-budget", lambda: tp.train_finite(MUP2, d1(), 16, time_budget=-1.0))
case("train_finite-string-time-budget",
     lambda: tp.train_finite(MUP2, d1(), 16, time_budget="1h"))
# Muon at width 8192: a history-based update priced at minutes, beyond one second
case("train_finite-muon-beyond-time-budget",
     lambda: tp.train_finite(tp.MLP(tp.mup(2, optimizer="muon"), 2, 1), d1(optimizer=tp.Muon()),
                             8192, time_budget=1.0))
case("routine-targets-overflow-mse", lambda: tp.Routine([[1.0, 0.0]], [[1e300]], lr=0.1))
case("routine-none-in-X", lambda: tp.Routine([[1.0, None], [0.0, 1.0]], [[1.0], [0.0]], lr=0.1))
case("lr_sweep-a-million-lrs",
     lambda: tp.lr_sweep(MUP1, d1(), np.geomspace(1e-3, 1e3, 10 ** 6), widths=[32, 64]))
for i, refine in enumerate([-1, 51, 2.5, "more", None]):
    case(f"lr_sweep-refine-{i}", lambda refine=refine: tp.lr_sweep(
        MUP1, d1(), [0.1, 0.2, 0.4], widths=[32, 64], refine=refine, executor="serial"))
case("simulate_limit-quadrature-relu", lambda: tp.simulate_limit(
    tp.MLP(tp.mup(1), 2, 1, phi="relu"), d1(), method="quadrature", particles=40 ** 3))
case("coord_check-a-width-that-does-not-fit", lambda: tp.coord_check(
    MUP2, d1(), widths=[32, 64, 10 ** 7], seeds=1, executor="serial"))


def _long(net):
    """A routine of batch 1 whose (B·T)² arrays alone exceed any machine's memory."""
    T = 400_000
    return tp.simulate_limit(net, tp.Routine(np.tile(D1["X"], (T // 3, 1)),
                                             np.tile(D1["Y"], (T // 3, 1)), lr=0.1,
                                             eval_inputs=X3), particles=100, replicates=2,
                             time_budget=None)


def _many_eval_limit(net):
    X = np.random.default_rng(0).standard_normal((3, 2))
    r = tp.Routine(X, X[:, :1], lr=0.1, eval_inputs=np.random.default_rng(1).standard_normal(
        (60_000, 2)))
    return tp.simulate_limit(net, r, particles=100, replicates=2)


# the limit engines' recorded feature kernels ((T+1)·E·E per replicate) are counted too
case("simulate_limit-one-hidden-feature-kernel-memory", lambda: _many_eval_limit(MUP1))
case("simulate_limit-deep-feature-kernel-memory", lambda: _many_eval_limit(MUP2))
case("simulate_limit-deep-history-memory", lambda: _long(MUP2))
# ---- Muon ------------------------------------------------------------------------------------
MUON2 = tp.MLP(tp.mup(2, optimizer="muon"), 2, 1)
for i, kw in enumerate([dict(momentum=1.0), dict(momentum=-0.5), dict(ns_steps=0),
                        dict(ns_steps=-3), dict(ns_steps=10 ** 9), dict(ns_steps="five"),
                        dict(vector_layers="rmsprop"), dict(nesterov="yes")]):
    case(f"muon-setting-{i}", lambda kw=kw: tp.Muon(**kw))
case("muon-with-an-sgd-parametrization",
     lambda: tp.train_finite(MUP2, d1(optimizer=tp.Muon()), 32))
case("muon-kernel-regime", lambda: tp.simulate_limit(
    tp.MLP(tp.ABC(tp.mup(2).a, tp.mup(2).b, ["1/2", "1/2", 0], optimizer="muon"), 2, 1),
    d1(optimizer=tp.Muon())))
case("muon-partners", lambda: tp.simulate_limit(MUON2, d1(optimizer=tp.Muon()), partners=8))
case("muon-to-torch", lambda: tp.to_torch(MUON2, 32, routine=d1(optimizer=tp.Muon())))
case("simulate_limit-deep-linear-memory", lambda: _long(tp.MLP(tp.mup(2), 2, 1, phi="id")))
case("simulate_limit-kernel-memory", lambda: tp.simulate_limit(NTP2, tp.Routine(
    np.random.default_rng(0).standard_normal((200_000, 2)), np.zeros((200_000, 1)), lr=0.1,
    eval_inputs=X3)))

# ---- kernels ----------------------------------------------------------------------------
for i, fn in enumerate([
        lambda: tp.nngp(NTP2, np.zeros((2, 3))), lambda: tp.nngp(NTP2, X3, np.zeros((1, 3))),
        lambda: tp.nngp(NTP2, [1.0, 2.0]), lambda: tp.nngp(NTP2, [[NAN, 0.0]]),
        lambda: tp.nngp("ntp", X3), lambda: tp.ntk(NTP2, np.zeros((2, 1))),
        lambda: tp.ntk(tp.MLP(tp.sp(2), 2, 1), X3), lambda: tp.ntk(NTP2, X3, layers=(0,)),
        lambda: tp.ntk(NTP2, X3, layers=(4,)), lambda: tp.ntk(NTP2, X3, layers=()),
        lambda: tp.ntk(NTP2, X3, layers=("1",)), lambda: tp.ntk(NTP2, np.zeros((0, 2))),
        lambda: tp.empirical_ntk(NTP2, X3, width=0), lambda: tp.empirical_ntk(NTP2, X3, width=-1),
        lambda: tp.empirical_ntk(NTP2, np.zeros((2, 3))),
        lambda: tp.empirical_ntk(NTP2, X3, np.zeros((1, 5))),
        lambda: tp.empirical_ntk(NTP2, X3, seed=-1), lambda: tp.empirical_ntk(NTP2, X3,
                                                                              backend="tpu"),
        lambda: tp.empirical_ntk("ntp", X3),
        lambda: tp.initial_outputs(tp.MLP(tp.ntp(2), 3, 1), d1(), 16),
        lambda: tp.initial_outputs(NTP2, d1(), 0)]):
    case(f"kernels-{i}", fn)

# ---- studies ------------------------------------------------------------------------------
for i, kw in enumerate([
        dict(widths=[64]), dict(widths=[64, 64]), dict(widths=64), dict(widths="64,128"),
        dict(widths=[0, 64]), dict(widths=[32.5, 64]), dict(seeds=0), dict(seeds=[]),
        dict(seeds=[1, 1]), dict(seeds=-2), dict(seeds=[-1, 2]), dict(steps=[5]),
        dict(steps=[0]), dict(steps=3), dict(steps=[]), dict(tolerance=-0.1),
        dict(tolerance=0), dict(tolerance="loose"), dict(executor="threads"),
        dict(executor=closed_pool()), dict(record=("nothing",))]):
    args = dict(widths=[32, 64], executor="serial")
    args.update(kw)
    case(f"coord_check-{i}", lambda args=args: tp.coord_check(MUP1, d1(), **args))
LIM1 = tp.simulate_limit(MUP1, d1(), particles=2_000, replicates=2)
for i, kw in enumerate([
        dict(widths=[64]), dict(widths=[64, 64]), dict(widths=64), dict(widths=[-1, 64]),
        dict(seeds=1), dict(seeds=[3]), dict(seeds=[2, 2]), dict(steps=[7]), dict(steps=2),
        dict(steps=[-1]), dict(limit="limit.npz"),
        dict(limit=tp.simulate_limit(MUP1, d1(lr=0.3), particles=2_000, replicates=2)),
        dict(limit=tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1, phi="relu"), d1(),
                                     particles=2_000, replicates=2)),
        dict(limit=LIM1, particles=5), dict(particles=5, limit_kwargs={"particles": 10}),
        dict(limit=tp.simulate_limit(MUP1, d1(), particles=2_000, replicates=2,
                                     eval_every=2)),
        dict(executor="cluster"), dict(executor=closed_pool()), dict(conditioned=True),
        dict(limit=LIM1, limit_kwargs={"seed": 1})]):
    args = dict(widths=[32, 64], seeds=2, executor="serial", limit=LIM1)
    args.update(kw)
    if "limit_kwargs" in kw and "limit" not in kw:
        args.pop("limit")
    case(f"convergence-{i}", lambda args=args: tp.convergence(MUP1, d1(), **args))
for i, kw in enumerate([dict(widths=[64]), dict(seeds=0), dict(executor="many"),
                        dict(particles=1), dict(replicates=0)]):
    args = dict(widths=[32, 64], seeds=1)
    args.update(kw)
    case(f"dichotomy-{i}", lambda args=args: tp.dichotomy(d1(), d_in=2, L=1, **args))

# ---- trajectories -------------------------------------------------------------------------
def finite_traj():
    from tp_limits.engine.trajectory import Trajectory
    return Trajectory(np.zeros((2, 1, 1)), np.zeros((1, 1, 1)), np.zeros(1), meta={})


for i, level in enumerate([0, 1, 1.5, -0.5, "95%", None, NAN]):
    case(f"ci-level-{i}", lambda level=level: LIM1.f_eval_ci(level))
case("ci-finite", lambda: finite_traj().f_eval_ci())


def load_bad(tmp_path_factory, content, name="x.npz"):
    path = tmp_path_factory.mktemp("bad") / name
    if content is not None:
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            np.savez(path, **content)
    return tp.Trajectory.load(path)


LOADS = {
    "missing": None, "garbage": b"not a zip", "empty": b"",
    "foreign": {"x": np.ones(3)},
    "bad-meta": {"f_eval": np.ones(1), "f_train": np.ones(1), "loss": np.ones(1),
                 "meta_json": np.array("{bad")},
    "no-loss": {"f_eval": np.ones(1), "f_train": np.ones(1), "meta_json": np.array("{}")},
    "1-D-f_eval": {"f_eval": np.ones(4), "f_train": np.ones((3, 1, 1)), "loss": np.ones(3),
                   "meta_json": np.array("{}")},
    "text-f_eval": {"f_eval": np.array([[["a"]]]), "f_train": np.ones((1, 1, 1)),
                    "loss": np.ones(1), "meta_json": np.array("{}")},
    "ragged-run": {"f_eval": np.ones((2, 1, 1)), "f_train": np.ones((3, 1, 1)),
                   "loss": np.ones(2), "meta_json": np.array("{}")},
}

# ---- experiment files ------------------------------------------------------------------
SMALL = {"parametrization": {"preset": "mup", "L": 2}, "data": {"generator": "d1"},
         "routine": {"lr": 0.5, "steps": 3}, "limit": {"particles": 2_000, "replicates": 2},
         "finite": {"widths": [32, 64], "seeds": 2, "parallel": False}}


def with_(section, **kv):
    import copy
    out = copy.deepcopy(SMALL)
    out.setdefault(section, {}).update(kv)
    return out


for i, cfg in enumerate([
        with_("model", phy="tanh"), with_("model", phi="tahn"), with_("model", sigma=[1, 2]),
        with_("model", sigma=-1.0), with_("model", readout_multiplier=0.0),
        with_("routine", lr="fast"), with_("routine", lr=-1.0), with_("routine", batch_size=0),
        with_("routine", loss="hinge"), with_("routine", steps=0), with_("limit", particles=1),
        with_("limit", particles=10 ** 12), with_("limit", replicates=0),
        with_("limit", workers=0), with_("limit", seed=-1), with_("limit", method="magic"),
        with_("limit", zdot="adjoint"), with_("limit", dtype="float16"),
        with_("limit", method="quadrature"), with_("finite", widths=[256]),
        with_("finite", widths=[0, 32]), with_("finite", widths=[32, 10 ** 7]),
        with_("finite", seeds=1), with_("finite", seeds=2.5), with_("finite", backend="tpu"),
        with_("finite", time_budget=-5), with_("finite", time_budget="1h"),
        with_("finite", widths=[32, 8192], time_budget=0.5),
        with_("parametrization", preset="sp"), with_("routine", momentum=1.5),
        with_("routine", adam_betas=[0.9, 0.99]), with_("routine", weight_decay=-0.1),
        with_("parametrization", L=0), with_("parametrization", L=10 ** 6),
        with_("parametrization", preset="mfp"), with_("parametrization", a=[0, 0, 0]),
        with_("data", generator="mnist"), with_("data", X=[[1.0, 0.0]]),
        {**SMALL, "limt": {}}, {k: v for k, v in SMALL.items() if k != "routine"},
        with_("data", generator=None, X=[[1.0, 0.0], [0.5]], Y=[[1.0], [0.0]]),
        with_("data", generator=None, X=[[1.0, NAN]], Y=[[1.0]]),
        with_("data", generator=None, X=[[1.0, 0.0]], Y=[[1.0], [0.0]]),
        with_("data", d_in=0), with_("data", n_eval=0), with_("experiment", name=5),
        [1, 2, 3], {"parametrization": 5, "data": {}, "routine": {}}]):
    case(f"experiment-{i}", lambda cfg=cfg: build(cfg))
case("experiment-sweep-refine", lambda: build(with_("sweep", lrs=[0.1, 0.2, 0.4], refine=-1)))
case("experiment-digits-eleven-classes",
     lambda: build(with_("data", generator="digits", d_out=11)))


# ---- the cases of a later sweep: sets, strings and scalars where a list is meant, complex
# data, seeds and paths of the wrong kind, overflowing depth factors ----------------------
R1 = d1()
L3 = [0.1, 0.2, 0.4]
RES3 = tp.MLP(tp.mup(3), 2, 1, residual=tp.Residual.depth_mup("sgd"))
for name, fn in {
        "adam-betas-a-set": lambda: tp.Adam(betas={0.999, 0.9}),
        "adam-betas-a-string": lambda: tp.Adam(betas="0.9"),
        "routine-complex-X": lambda: tp.Routine(lr=0.1, X=np.eye(2) * 1j, Y=np.ones((2, 1))),
        "routine-complex-Y": lambda: tp.Routine(lr=0.1, X=np.eye(2), Y=np.ones((2, 1)) + 1j),
        "lr_sweep-limit-a-string": lambda: tp.lr_sweep(MUP1, R1, L3, widths=[32], seeds=1,
                                                       limit="no"),
        "lr_sweep-widths-a-number": lambda: tp.lr_sweep(MUP1, R1, L3, widths=64, seeds=1),
        "lr_sweep-widths-a-string": lambda: tp.lr_sweep(MUP1, R1, L3, widths="64", seeds=1),
        "lr_sweep-widths-a-set": lambda: tp.lr_sweep(MUP1, R1, L3, widths={32, 64}, seeds=1),
        "lr_sweep-lrs-a-string": lambda: tp.lr_sweep(MUP1, R1, "0.1", widths=[32], seeds=1),
        "lr_sweep-seeds-a-set": lambda: tp.lr_sweep(MUP1, R1, L3, widths=[32], seeds={1, 2}),
        "digits-negative-seed": lambda: tp.datasets.digits(seed=-1),
        "digits-text-seed": lambda: tp.datasets.digits(seed="0"),
        "trajectory-load-none": lambda: tp.Trajectory.load(None),
        "trajectory-load-a-number": lambda: tp.Trajectory.load(3),
        "simulate_limit-deep-16-particles": lambda: tp.simulate_limit(MUP2, R1, particles=16),
        "residual-alpha-overflows": lambda: tp.MLP(tp.mup(3), 2, 1,
                                                   residual=tp.Residual(alpha=-2000)),
        "residual-gamma-underflows": lambda: tp.MLP(tp.mup(3), 2, 1,
                                                    residual=tp.Residual(gamma=5000)),
        "residual-alpha-a-string": lambda: tp.Residual(alpha="0.5"),
        "warmup_cosine-final-a-string": lambda: tp.schedules.warmup_cosine(0.4, 10,
                                                                           final="0.5"),
        "step_decay-factor-a-string": lambda: tp.schedules.step_decay(0.4, 10, 2, factor="0.5"),
        "bias-sigma-a-set": lambda: tp.MLP(tp.mup(2), 2, 1, sigma={1.0, 2.0, 3.0}),
        "depth_check-fitted-beyond-the-depths": lambda: tp.depth_check(RES3, R1, [1, 2],
                                                                       fitted=3),
        "depth_check-record": lambda: tp.depth_check(RES3, R1, [1, 2], record=("stats",)),
        "depth_check-progress-a-string": lambda: tp.depth_check(RES3, R1, [1, 2],
                                                                progress="yes"),
        "depth_check-unknown-training-option": lambda: tp.depth_check(RES3, R1, [1, 2],
                                                                      momentum=0.9),
        "depth_check-depths-a-string": lambda: tp.depth_check(RES3, R1, "12"),
        "depth_sweep-record": lambda: tp.depth_sweep(RES3, R1, L3, [1, 2], widths=[32],
                                                     record=("stats",)),
        "depth_sweep-deepest-memory": lambda: tp.depth_sweep(RES3, R1, L3, [1, 2, 400],
                                                             widths=[32, 64],
                                                             particles=2 ** 20),
}.items():
    case(name, fn)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_gets_a_library_error_before_any_work(name):
    with pytest.raises(tp.TPError):
        CASES[name]()


@pytest.mark.parametrize("name", sorted(LOADS))
def test_bad_trajectory_files_are_library_errors(name, tmp_path_factory):
    with pytest.raises(tp.TPError):
        load_bad(tmp_path_factory, LOADS[name])


def test_trajectory_load_refuses_a_fifo_a_folder_and_a_single_array(tmp_path):
    """A FIFO would block the read forever, a folder and an .npy are not Trajectories: each
    is refused by name (the FIFO in a daemon thread, so a regression cannot hang the suite)."""
    import os
    import threading
    fifo, npy = tmp_path / "pipe.npz", tmp_path / "one.npy"
    os.mkfifo(fifo)
    np.save(npy, np.ones(3))
    for path, match in ((fifo, "not a regular file"), (tmp_path, "not a regular file"),
                        (npy, r"one array \(.npy\)")):
        errors = []

        def load(path=path):
            try:
                tp.Trajectory.load(path)
            except Exception as exc:         # noqa: BLE001 -- checked below
                errors.append(exc)
        worker = threading.Thread(target=load, daemon=True)
        worker.start()
        worker.join(20)
        assert not worker.is_alive(), f"Trajectory.load({path}) blocked"
        assert len(errors) == 1 and isinstance(errors[0], tp.TPError), errors
        assert __import__("re").search(match, str(errors[0])), str(errors[0])


def test_save_into_a_missing_folder_is_a_library_error(tmp_path):
    with pytest.raises(tp.TPError, match="does not exist"):
        LIM1.save(tmp_path / "nowhere" / "x.npz")


# ---- the command line ----------------------------------------------------------------------
def cli_cases(tmp):
    bad_utf8 = tmp / "latin1.toml"
    bad_utf8.write_bytes("[routine]\nlr = 0.5 # caf\xe9\n".encode("latin-1"))
    bad_toml = tmp / "bad.toml"
    bad_toml.write_text("[routine\nlr = 0.5\n")
    good = tmp / "good.toml"
    good.write_text('[parametrization]\npreset = "mup"\nL = 1\n[data]\ngenerator = "d1"\n'
                    '[routine]\nlr = 0.5\nsteps = 2\n[limit]\nparticles = 2000\n'
                    'replicates = 2\n[finite]\nenabled = false\n')
    busy = tmp / "busy"
    busy.mkdir()
    (busy / "old.txt").write_text("a previous run")
    afile = tmp / "afile"
    afile.write_text("x")
    ragged = tmp / "ragged.toml"
    ragged.write_text('[parametrization]\npreset = "mup"\nL = 1\n[data]\n'
                      'X = [[1.0, 0.0], [0.5]]\nY = [[1.0], [0.0]]\n[routine]\nlr = 0.5\n')
    return {
        "classify-bad-a": ["classify", "--a", "0,x y", "--b", "0,0"],
        "classify-mfp-L2": ["classify", "mfp", "--L", "2"],
        "classify-lengths": ["classify", "--a", "0,0,0", "--b", "0,0"],
        "classify-no-param": ["classify"],
        "classify-floordiv": ["classify", "--a", "0,1//2", "--b", "0,1/2"],
        "table-L0": ["table", "--L", "0"],
        "table-huge": ["table", "--L", "1000000"],
        "table-L-text": ["table", "--L", "two"],
        "coord-widths-text": ["coord-check", "mup", "--widths", "abc"],
        "coord-widths-one": ["coord-check", "mup", "--widths", "64"],
        "coord-widths-zero": ["coord-check", "mup", "--widths", "0,64"],
        "coord-plot-missing-folder": ["coord-check", "mup", "--widths", "32,64", "--seeds", "2",
                                      "--plot", str(tmp / "no" / "cc.png")],
        "coord-plot-folder": ["coord-check", "mup", "--widths", "32,64", "--plot", str(tmp)],
        "coord-phi": ["coord-check", "mup", "--phi", "tahn", "--widths", "32,64"],
        "coord-lr": ["coord-check", "mup", "--lr", "-1", "--widths", "32,64"],
        "coord-seeds": ["coord-check", "mup", "--seeds", "0", "--widths", "32,64"],
        "coord-steps": ["coord-check", "mup", "--steps", "0", "--widths", "32,64"],
        "run-missing": ["run", str(tmp / "nope.toml")],
        "run-folder": ["run", str(tmp)],
        "run-latin1": ["run", str(bad_utf8)],
        "run-bad-toml": ["run", str(bad_toml)],
        "run-ragged": ["run", str(ragged), "--check"],
        "run-no-file": ["run"],
        "run-out-busy": ["run", str(good), "--out", str(busy)],
        "run-out-file": ["run", str(good), "--out", str(afile)],
        "demo-out-file": ["demo", "--out", str(afile)],
        "demo-out-busy": ["demo", "--out", str(busy)],
        "unknown-command": ["fly"],
        "unknown-option": ["table", "--fast"],
    }


CLI_NAMES = sorted([
    "classify-bad-a", "classify-mfp-L2", "classify-lengths", "classify-no-param",
    "classify-floordiv", "table-L0", "table-huge", "table-L-text", "coord-widths-text",
    "coord-widths-one", "coord-widths-zero", "coord-plot-missing-folder", "coord-plot-folder",
    "coord-phi", "coord-lr", "coord-seeds", "coord-steps", "run-missing", "run-folder",
    "run-latin1", "run-bad-toml", "run-ragged", "run-no-file", "run-out-busy", "run-out-file",
    "demo-out-file", "demo-out-busy", "unknown-command", "unknown-option"])


@pytest.mark.parametrize("name", CLI_NAMES)
def test_cli_bad_input_is_one_line_and_status_2(name, tmp_path, capsys):
    argv = cli_cases(tmp_path)[name]
    try:
        status = main(argv)
    except SystemExit as exc:            # argparse's own usage errors
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2, (status, err)
    assert "Traceback" not in err and 1 <= len(err.strip().splitlines()) <= 3, err
    assert "error" in err


def test_the_sweep_is_large():
    """The issue asked for at least 300 bad inputs, all refused before any work."""
    assert len(CASES) + len(LOADS) + 1 + len(CLI_NAMES) >= 300


@pytest.mark.parametrize("name, match", [
    ("simulate_limit-inapplicable-0", "partners=8 does not apply to the one-hidden-layer"),
    ("simulate_limit-inapplicable-2", "zdot='tangent' does not apply"),
    ("simulate_limit-inapplicable-3", "debias_partners= apply to the deep limit"),
    ("simulate_limit-inapplicable-5", "method='monte_carlo' does not apply.*kernel"),
    ("train_finite-muon-beyond-time-budget",
     r"width 8192 \(.* history-based .*\) is estimated at .* beyond time_budget = 1 s"),
    ("simulate_limit-inapplicable-8", "f0 given as an array does not apply: muP is feature"),
    ("simulate_limit-inapplicable-9", "samples=4 does not apply.*f_0 = 0"),
    ("convergence-finite-limit", "finite network's Trajectory"),
    ("routine-none-in-X", r"X has a missing value \(None\) at row 0, column 1"),
    ("digits-no-training-split", "both splits need at least one image"),
    ("digits-batch-beyond-the-data", "batch_size = 1000000 exceeds"),
    ("lr_sweep-a-million-lrs", "at most 1000"),
    ("lr_sweep-refine-1", "refine"),
    ("simulate_limit-quadrature-relu", "kink.*monte_carlo"),
    ("coord_check-a-width-that-does-not-fit", "width 10000000"),
    ("simulate_limit-deep-history-memory", "history Gram arrays"),
    ("muon-setting-2", r"ns_steps = 0 must be an int >= 1"),
    ("muon-with-an-sgd-parametrization", r"optimizer='muon'"),
    ("muon-kernel-regime", "msign.*not linear in the gradients"),
    ("simulate_limit-one-hidden-feature-kernel-memory", r"recorded results.*record=\(\)"),
    ("simulate_limit-deep-feature-kernel-memory", r"recorded results.*record=\(\)"),
    ("simulate_limit-deep-linear-memory", "exact deep linear"),
    ("simulate_limit-kernel-memory", "kernels of 200,003 distinct inputs"),
    ("routine-targets-overflow-mse", "rescale the targets"),
    ("experiment-digits-eleven-classes", r"data\.d_out = 11 is the number of digit classes"),
    ("adam-betas-a-set", r"betas = \{.*got a set, whose order is not yours"),
    ("routine-complex-X", "X is complex"),
    ("lr_sweep-limit-a-string", "limit = 'no' must be True or False"),
    ("lr_sweep-widths-a-number", "widths = 64 must be a list"),
    ("digits-negative-seed", "seed = -1 must be an int >= 0"),
    ("trajectory-load-none", "path = None must be a path"),
    ("simulate_limit-deep-16-particles", "particles = 16: the deep Monte Carlo engine needs "
                                         "at least 32"),
    ("depth_check-fitted-beyond-the-depths", "fitted = 3 exceeds the largest supported "
                                             "value 2"),
    ("depth_check-record", r"depth_check sets record of each run itself; leave it out \(record: it "
     r"records what it measures\)"),
    ("depth_sweep-deepest-memory", "at K = 400 blocks"),
    ("residual-alpha-overflows", r"alpha = -2000.0 with K = 2 blocks .* infinite"),
    ("warmup_cosine-final-a-string", r"final \(a fraction of the peak\) = '0.5' must be a "
                                     "number"),
    ("simulate_limit-deep-beyond-time-budget", r"\(its cost grows like T²: T = 4000 steps.*\) "
                                               r"is estimated at [\d.]+ (min|h) on two cores"),
])
def test_the_error_names_what_was_wrong(name, match):
    with pytest.raises(tp.TPError, match=match):
        CASES[name]()


def test_coord_check_with_no_steps_names_steps(capsys):
    assert main(["coord-check", "mup", "--steps", "0", "--widths", "32,64"]) == 2
    err = capsys.readouterr().err
    assert "--steps 0" in err and "empty" not in err


def _width_calls():
    """Every entry point that takes a network's width, called with ``width``."""
    from tp_limits.adapters import LoRAToy, fine_tune, sine_task
    from tp_limits.transformer import (Transformer, empirical_transformer_ntk, markov_task,
                                       train_transformer, transformer_initial_outputs)
    model, task = Transformer(8, 4), markov_task(vocab=8, seq_len=4, n_train=2, n_eval=2)
    toy = LoRAToy()
    return {
        "train_finite": lambda w: tp.train_finite(MUP2, d1(), w),
        "empirical_ntk": lambda w: tp.empirical_ntk(MUP2, X3, width=w),
        "finite_constants": lambda w: MUP2.finite_constants(w, 0.1),
        "train_transformer": lambda w: train_transformer(model, task, w, 0.1),
        "empirical_transformer_ntk": lambda w: empirical_transformer_ntk(model, task.tokens,
                                                                         w),
        "transformer_initial_outputs": lambda w: transformer_initial_outputs(model, task, w),
        "fine_tune": lambda w: fine_tune(toy, sine_task(toy.d), w, 0.1, 0.1, steps=1),
    }


@pytest.mark.parametrize("name", sorted(_width_calls()))
def test_every_width_beyond_the_largest_is_refused_by_name(name):
    """One check (spec.checks.check_width) behind every width: 10⁹ and 0 are refused as
    ``width`` before any work, wherever a width is taken."""
    call = _width_calls()[name]
    with pytest.raises(tp.SpecError, match="width = 1000000000 exceeds the largest"):
        call(10 ** 9)
    with pytest.raises(tp.SpecError, match="width = 0 must be an int >= 1"):
        call(0)
