"""From a mup configuration to this package and back: from_mup's mapping against mup's
own rules written out, the weights of train_finite, and (where torch / mup are installed)
round trips through torch and genuine mup training (docs/interop.md)."""
import math
import sys

import numpy as np
import pytest
from conftest import D1

import tp_limits as tp

N0, N = 64, 256


def _mup_w_space(L, n, n0, stds, eta, kind, k):
    """mup's numbers in W-space, from its rules as written in its documentation:
    mup.init.normal_ divides a hidden matrix's std by √(fan-in width_mult); MuReadout
    multiplies its input by output_mult·n0/n; MuSGD multiplies a vector-like weight's
    rate by its width_mult (n/n0) and divides a hidden matrix's by fan-in/fan-out mult
    (1); MuAdam divides a hidden matrix's rate by its width_mult; the torch loss is k
    times this package's."""
    wm = n / n0
    std = [stds[0]] + [s / math.sqrt(wm) for s in stds[1:L]] + [stds[L] / wm]
    if kind == "sgd":           # W-space rate of W^l; the readout W = W_out/wm moves 1/wm²
        lr = [eta * k * wm] + [eta * k] * (L - 1) + [eta * k * wm / wm ** 2]
    else:                       # Adam: the W-space step per unit direction
        lr = [eta] + [eta / wm] * (L - 1) + [eta / wm]
    return std, lr


@pytest.mark.parametrize("L", [1, 2, 3])
@pytest.mark.parametrize("optimizer, loss", [("MuSGD", "MSELoss"), ("MuSGD", "CrossEntropyLoss"),
                                             ("MuAdam", "MSELoss")])
def test_from_mup_gives_mups_weights_and_rates(L, optimizer, loss):
    stds = [1.3] + [0.8] * (L - 1) + [0.6]
    eta, d_out = 0.05, 3
    tr = tp.from_mup(4, N, d_out, hidden_layers=L, base_width=N0, init_std=stds,
                     output_mult=2.5, nonlinearity="Tanh", optimizer=optimizer, lr=eta, loss=loss)
    kind = "sgd" if optimizer == "MuSGD" else "adam"
    k = 2 / d_out if loss == "MSELoss" else 1.0
    std, lr = _mup_w_space(L, N, N0, stds, eta, kind, k)
    c = tr.net.finite_constants(N, tr.lr)
    assert np.allclose(c.init_std, std, rtol=1e-13)
    got = c.lr if kind == "sgd" else [w * a for w, a in zip(c.w_scale, c.adam_lr)]
    assert np.allclose(got, lr, rtol=1e-13)
    assert tr.net.output_multiplier == 2.5 and tr.net.phi == "tanh"
    assert tr.loss == ("mse" if loss == "MSELoss" else "xent")
    assert tr.net.param.classify().regime == "feature_learning"
    r = tr.routine(np.eye(4)[:2], np.zeros((2, d_out)) if loss == "MSELoss" else np.eye(d_out)[:2])
    assert r.lr == tr.lr and r.optimizer == tr.optimizer


def test_from_mup_table_and_the_issues_constants():
    """σ = (s_in, s_hid √n0, s_out n0), lr_mult = (1/n0, 1, n0) for MuSGD and (1, n0, n0)
    for MuAdam; Adam's torch eps is the width-free ε/n, so a fixed eps is ε = eps·n."""
    sgd = tp.from_mup(3, N, 2, hidden_layers=2, base_width=N0, init_std=(1.0, 0.5, 0.25))
    assert sgd.net.sigma == pytest.approx((1.0, 0.5 * 8, 0.25 * 64))
    assert sgd.net.lr_mult == pytest.approx((1 / 64, 1.0, 64.0))
    adam = tp.from_mup(3, N, 2, hidden_layers=2, base_width=N0, optimizer="MuAdam", lr=0.01,
                       optimizer_settings={"eps": 1e-8}, loss="CrossEntropyLoss")
    assert adam.net.lr_mult == pytest.approx((1.0, 64.0, 64.0))
    assert adam.optimizer.eps == pytest.approx(1e-8 * N)
    assert "not width-free" in str(adam).lower() and "ε/64" in str(adam)
    zero = tp.from_mup(3, N, 2, init_std=(1.0, 0.0))
    assert zero.net.finite_constants(N).init_std[-1] == 0.0
    assert "zero readout" in zero.net.param.label


@pytest.mark.parametrize("kwargs, match", [
    (dict(optimizer="MuAdam", optimizer_settings={"weight_decay": 0.1}), "use MuAdamW"),
    (dict(base_width=64, optimizer_settings={"weight_decay": 0.1}), "no λ reproduces it"),
    (dict(optimizer="Lion"), "MuSGD"),
    (dict(loss="L1Loss"), "MSELoss"),
    (dict(nonlinearity="Mish"), "unknown nonlinearity"),
    (dict(optimizer_settings={"momentm": 0.9}), "momentm"),
    (dict(optimizer_settings={"momentum": 0.9, "dampening": 0.1}), "dampening"),
    (dict(init_std=(1.0, 1.0, 1.0)), "init_std has 3 entries"),
    (dict(base_width=(64, 32)), "base_width has 2 entries"),
    (dict(output_mult=float("nan")), "output_mult"),
])
def test_from_mup_refusals_name_the_setting(kwargs, match):
    with pytest.raises(tp.SpecError, match=match):
        tp.from_mup(3, N, 2, **kwargs)


def test_keep_weights_returns_the_initial_and_final_weights(tmp_path):
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    net = tp.MLP(tp.mup(2), 3, 2, phi="tanh")
    r = tp.Routine(X, Y, lr=0.3, batch_size=2, optimizer=tp.SGD(momentum=0.5))
    tr = tp.train_finite(net, r, 64, seed=4, record=(), keep_weights=True)
    assert tp.train_finite(net, r, 64, seed=4, record=()).weights is None
    W0, W = tr.weights.initial, tr.weights.final
    assert [w.shape for w in W0] == [(64, 3), (64, 64), (2, 64)] == [w.shape for w in W]
    std = net.finite_constants(64).init_std
    assert all(abs(w.std() / s - 1) < 0.2 for w, s in zip(W0, std))

    def forward(Ws, x):
        for w in Ws[:-1]:
            x = np.tanh(x @ w.T)
        return net.output_multiplier * x @ Ws[-1].T
    Xe = tp.spec.Problem(net, r).eval_inputs
    assert np.allclose(forward(W0, Xe), tr.f_eval[0], rtol=1e-13, atol=1e-15)
    assert np.allclose(forward(W, Xe), tr.f_eval[-1], rtol=1e-13, atol=1e-15)
    assert not np.allclose(W[1], W0[1])
    tr.save(tmp_path / "t.npz")
    back = tp.Trajectory.load(tmp_path / "t.npz")
    assert all(np.array_equal(a, b) for a, b in zip(back.weights.final, W))
    with pytest.raises(tp.SpecError, match="keep_weights"):
        tp.train_finite(net, r, 64, keep_weights="yes")


def test_to_torch_without_torch_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)          # import torch fails
    with pytest.raises(tp.SpecError, match=r"pip install 'tp_limits\[torch\]'"):
        tp.to_torch(tp.MLP(tp.mup(1), 2, 1), 16)


def _problem(L, opt, loss, d_in=3, d_out=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((40, d_in))
    Y = (rng.standard_normal((40, d_out)) if loss == "mse"
         else np.eye(d_out)[rng.integers(0, d_out, 40)])
    adam = isinstance(opt, tp.Adam)
    net = tp.MLP(tp.mup(L, optimizer="adam" if adam else "sgd"), d_in, d_out, phi="tanh",
                 sigma=[1.2] + [0.9] * (L - 1) + [0.8], lr_mult=[0.7] + [1.1] * (L - 1) + [1.3],
                 readout_multiplier=1.5)
    r = tp.Routine(X, Y, lr=0.02 if adam else 0.2, loss=loss, batch_size=4, steps=10,
                   optimizer=opt, eval_inputs=X[:6])
    return net, r


OPTS = [tp.SGD(), tp.SGD(momentum=0.9), tp.SGD(momentum=0.8, weight_decay=0.3),
        tp.SGD(momentum=0.8, weight_decay=0.3, nesterov=True), tp.Adam(),
        tp.Adam(weight_decay=0.2, eps=1e-3)]


@pytest.mark.parametrize("L", [1, 2, 3])
@pytest.mark.parametrize("opt", OPTS, ids=str)
@pytest.mark.parametrize("loss", ["mse", "xent"])
def test_to_torch_trains_as_train_finite(L, opt, loss):
    """Package -> torch -> 10 steps equals train_finite to 1e-12 (plain readout)."""
    pytest.importorskip("torch", reason="torch is not installed (pip install 'tp_limits[torch]')")
    net, r = _problem(L, opt, loss)
    ref = tp.train_finite(net, r, 96, seed=5, record=())
    got = tp.to_torch(net, 96, seed=5, routine=r).train(r, net)
    assert np.abs(got - ref.f_eval).max() <= 1e-12
    assert np.abs(ref.f_eval[-1] - ref.f_eval[0]).max() > 1e-2        # it did train


@pytest.mark.parametrize("res, L, norm", [(tp.Residual(0.5, 0.3), 4, None),
                                          (tp.Residual(1.0, -0.5, block_depth=2), 5, None),
                                          (tp.Residual(1.0, -0.5, 2, phi_inside=True), 5,
                                           "layer")],
                         ids=["blocks of 1", "blocks of 2", "pre-norm, phi inside"])
@pytest.mark.parametrize("opt", [OPTS[3], OPTS[5]], ids=str)
def test_to_torch_trains_a_residual_network_as_train_finite(res, L, norm, opt):
    """The module's skips and the blocks' rates K^(−γ): 10 steps equal train_finite."""
    pytest.importorskip("torch", reason="torch is not installed (pip install 'tp_limits[torch]')")
    net, r = _problem(L, opt, "mse")
    net = tp.MLP(net.param, net.d_in, net.d_out, net.phi, net.sigma, net.lr_mult,
                 net.readout_multiplier, residual=res, norm=norm)
    ref = tp.train_finite(net, r, 96, seed=5, record=())
    got = tp.to_torch(net, 96, seed=5, routine=r).train(r, net)
    assert np.abs(got - ref.f_eval).max() <= 1e-12
    assert np.abs(ref.f_eval[-1] - ref.f_eval[0]).max() > 1e-2


@pytest.mark.parametrize("base", [1, 128])
@pytest.mark.parametrize("opt", [OPTS[3], OPTS[5]], ids=str)
def test_to_torch_as_a_mup_model(base, opt):
    """With base_width and mup installed: a MuReadout model after set_base_shapes that still
    trains as train_finite (width 256, base widths 1 and 128), and from_torch reads it."""
    pytest.importorskip("torch", reason="torch is not installed")
    mup = pytest.importorskip("mup", reason="mup is not installed (pip install mup)")
    net, r = _problem(2, opt, "xent")
    tm = tp.to_torch(net, 256, seed=2, routine=r, base_width=base)
    assert isinstance(tm.module.readout, mup.MuReadout)
    assert tm.module.readout.weight.infshape.width_mult() == pytest.approx(256 / base)
    ref = tp.train_finite(net, r, 256, seed=2, record=())
    assert np.abs(tm.train(r, net) - ref.f_eval).max() <= 1e-12
    back = tp.from_torch(tm.module, lr=0.1, init_std=(1.0, 0.5, 0.25))
    assert (back.net.d_in, back.net.d_out, back.net.L, back.width) == (3, 2, 2, 256)
    assert back.net.readout_multiplier == net.output_multiplier and back.net.phi == "tanh"
    assert back.net.lr_mult == pytest.approx((1 / base, 1.0, base))


@pytest.mark.parametrize("L, n0, optimizer, settings, loss", [
    (1, 1, "MuSGD", None, "MSELoss"),
    (2, 64, "MuSGD", {"momentum": 0.9}, "CrossEntropyLoss"),
    (3, 1, "MuSGD", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01}, "MSELoss"),
    (2, 64, "MuAdam", {"eps": 0.0}, "MSELoss"),
    (2, 1, "MuAdamW", {"weight_decay": 0.1}, "CrossEntropyLoss"),
])
def test_from_mup_trains_as_mup_does(L, n0, optimizer, settings, loss):
    """A model built and trained with mup itself (nn.Linear, MuReadout, set_base_shapes,
    MuSGD/MuAdam(W), torch's loss) from train_finite's initial weights, against
    train_finite on from_mup's network: the same outputs to 1e-12 relative."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    mup = pytest.importorskip("mup", reason="mup is not installed (pip install mup)")
    n, d_in, d_out = 128, 3, 2
    eta = 0.3 if (optimizer == "MuSGD" and n0 == 1) else 0.01
    tr = tp.from_mup(d_in, n, d_out, hidden_layers=L, base_width=n0,
                     init_std=[1.3] + [0.8] * (L - 1) + [0.7], output_mult=1.7,
                     nonlinearity="tanh", optimizer=optimizer, lr=eta,
                     optimizer_settings=settings, loss=loss)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, d_in))
    Y = (rng.standard_normal((40, d_out)) if loss == "MSELoss"
         else np.eye(d_out)[rng.integers(0, d_out, 40)])
    r = tr.routine(X, Y, batch_size=4, eval_inputs=X[:5])
    ref = tp.train_finite(tr.net, r, n, seed=3, record=(), keep_weights=True)

    class UserMLP(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            sizes = [d_in] + [width] * L
            self.hidden = torch.nn.ModuleList(
                torch.nn.Linear(sizes[l], sizes[l + 1], bias=False, dtype=torch.float64)
                for l in range(L))
            self.readout = mup.MuReadout(width, d_out, bias=False, output_mult=1.7,
                                         dtype=torch.float64)

        def forward(self, x):
            for h in self.hidden:
                x = torch.tanh(h(x))
            return self.readout(x)
    model = UserMLP(n)
    mup.set_base_shapes(model, UserMLP(n0))
    W = ref.weights.initial
    with torch.no_grad():
        for h, w in zip(model.hidden, W[:-1]):
            h.weight.copy_(torch.as_tensor(w))
        model.readout.weight.copy_(torch.as_tensor(W[-1] * n / n0))
    opt = getattr(mup, optimizer)(model.parameters(), lr=eta, **(settings or {}))
    loss_fn = getattr(torch.nn, loss)()
    P = tp.spec.Problem(tr.net, r)
    Xe = torch.as_tensor(P.eval_inputs.copy())
    out = [model(Xe).detach().numpy()]
    for t in range(P.T):
        xb, yb = (torch.as_tensor(a.copy()) for a in P.batch(t))
        opt.zero_grad()
        loss_fn(model(xb), yb).backward()
        opt.step()
        out.append(model(Xe).detach().numpy())
    scale = np.abs(ref.f_eval).max()
    assert np.abs(np.array(out) - ref.f_eval).max() <= 1e-12 * scale


def test_the_interop_page_example_runs():
    """docs/interop.md §3, as written: from_mup, the classification and an lr_sweep with
    an ∞ row (the other blocks there need torch)."""
    import pathlib
    import re
    pytest.importorskip("sklearn", reason="the example uses tp.datasets.digits")
    text = (pathlib.Path(__file__).parents[1] / "docs" / "interop.md").read_text(encoding="utf-8")
    block = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    scope = {}
    exec(compile(block, "docs/interop.md", "exec"), scope)
    sweep = scope["sweep"]
    assert "inf" in sweep.optimal_lr and set(sweep.optimal_lr) >= {128, 512}
    assert scope["cfg"].net.param.classify().regime == "feature_learning"


def _mup_module(torch, mup, extra=None, skip=False, reorder=False, widths=(32, 32)):
    """A small mup MLP (nn.Linear, Tanh, MuReadout) after set_base_shapes, with a module
    ``extra`` in it, a skip connection, or its hidden layers applied in reverse order."""
    class M(torch.nn.Module):
        def __init__(self, scale):
            super().__init__()
            ws = [w * scale for w in widths]
            self.l1 = torch.nn.Linear(3, ws[0], bias=False, dtype=torch.float64)
            self.l2 = torch.nn.Linear(ws[0], ws[1], bias=False, dtype=torch.float64)
            self.l3 = torch.nn.Linear(ws[1], ws[1], bias=False, dtype=torch.float64)
            self.act = torch.nn.Tanh()
            self.extra = extra
            self.readout = mup.MuReadout(ws[1], 1, bias=False, dtype=torch.float64)

        def forward(self, x):
            h = self.act(self.l1(x))
            if self.extra is not None:
                h = self.extra(h)
            a, b = (self.l3, self.l2) if reorder else (self.l2, self.l3)
            g = self.act(a(h))
            g = self.act(b(g)) + (g if skip else 0.0)
            return self.readout(g)
    model = M(2)
    mup.set_base_shapes(model, M(1))
    return model


@pytest.mark.parametrize("case, message", [
    ("dropout", r"extra \(Dropout\)"), ("layernorm", r"extra \(LayerNorm\)"),
    ("skip", "computes something else"), ("reorder", "computes something else"),
    ("widths", "one hidden width")])
def test_from_torch_refuses_what_it_cannot_read(case, message):
    """Anything but a plain Linear stack of one width, applied in registration order, is
    refused with the module named (it used to be read silently, as a wrong network)."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    mup = pytest.importorskip("mup", reason="mup is not installed (pip install mup)")
    extra = {"dropout": torch.nn.Dropout(0.1),
             "layernorm": torch.nn.LayerNorm(64, dtype=torch.float64)}.get(case)
    if case == "widths":
        model = None
        with pytest.raises(tp.SpecError, match=message):
            model = _mup_module(torch, mup, widths=(32, 48))
            tp.from_torch(model, lr=0.1)
        return
    model = _mup_module(torch, mup, extra=extra, skip=case == "skip",
                        reorder=case == "reorder")
    with pytest.raises(tp.SpecError, match=message):
        tp.from_torch(model, lr=0.1)
    # the same module without the fault is read
    tp.from_torch(_mup_module(torch, mup), lr=0.1)


@pytest.mark.parametrize("settings, message", [
    ({"nesterov": "yes"}, r"optimizer_settings\['nesterov'\] = 'yes' must be True or False"),
    ({"momentum": 1.5}, r"optimizer_settings\['momentum'\] = 1.5"),
    ([("momentum", 0.9)], "must be a dict"),
])
def test_from_mup_checks_every_setting(settings, message):
    with pytest.raises(tp.SpecError, match=message):
        tp.from_mup(2, 64, 1, optimizer_settings=settings)
    with pytest.raises(tp.SpecError, match="one class"):
        tp.from_mup(2, 64, 1, loss="CrossEntropyLoss")


def test_to_torch_refuses_before_building_weights(monkeypatch):
    """Muon has no torch optimizer here, a bad seed or a width beyond memory is named:
    each before a single weight is drawn."""
    from tp_limits.finite import network
    monkeypatch.setattr(network.FiniteNetwork, "__init__",
                        lambda *a, **k: pytest.fail("weights were built"))
    net = tp.MLP(tp.mup(2, optimizer="muon"), 2, 1)
    with pytest.raises(tp.SpecError, match="no torch optimizer for Muon"):
        tp.to_torch(net, 64, routine=tp.Routine(lr=0.05, optimizer=tp.Muon(), **D1))
    with pytest.raises(tp.SpecError, match="seed"):
        tp.to_torch(tp.MLP(tp.mup(2), 2, 1), 64, seed=-1)
    pytest.importorskip("torch", reason="torch is not installed")
    with pytest.raises(tp.MemoryBudgetError, match="to_torch at width"):
        tp.to_torch(tp.MLP(tp.mup(2), 2, 1), 10 ** 7)
