"""Transformers at width n (tp_limits.transformer): the hand-written backward pass against
central differences and torch's autograd, the reductions to simpler networks, the
attention logits' exponents against a coordinate check, training, and bad input."""
import numpy as np
import pytest
from conftest import interrupt_on_call

from tp_limits import SGD, Adam, Muon, Residual
from tp_limits.errors import DivergenceError, SpecError, UnsupportedError
from tp_limits.transformer import (Transformer, attention_coord_check, classify_attention,
                                   markov_task, train_transformer)
from tp_limits.transformer.network import backward, forward, init_params, layer_norm
from tp_limits.transformer.train import Stepper, loss_and_gradient

TASK = markov_task(vocab=7, seq_len=5, n_train=3, n_eval=2, seed=4)
CONFIGS = [dict(), dict(causal=False, heads=2, phi="tanh", loss="last"),
           dict(attention="1/sqrt(d)", blocks=2, zero_query=True, branch=0.5),
           dict(attention="none", positions=False), dict(mlp=False, heads=4, attn_mult=2.0),
           dict(tied=True, sigma_out=1.5, blocks=2),
           dict(blocks=3, heads=2, residual=Residual(1.0, 0.5, block_depth=2))]


def _perturbed(model, n=8, seed=1):
    """Parameters away from initialization (so W_Q = 0 and ReLU kinks are not special)."""
    params = init_params(model, n, np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    return {k: v + 0.2 * rng.standard_normal(v.shape) for k, v in params.items()}


def _loss(model, params, task=TASK):
    return loss_and_gradient(model, forward(model, params, task.tokens).f, task.targets)


@pytest.mark.parametrize("kw", CONFIGS)
def test_the_backward_pass_equals_central_differences(kw):
    model = Transformer(vocab=7, seq_len=5, **kw)
    params = _perturbed(model)
    _, df = _loss(model, params)
    grads = backward(model, params, forward(model, params, TASK.tokens), df)
    assert set(grads) == set(params)
    rng, h = np.random.default_rng(0), 1e-5
    for name, W in params.items():
        for _ in range(3):
            idx = tuple(rng.integers(s) for s in W.shape)
            up, down = {**params, name: W.copy()}, {**params, name: W.copy()}
            up[name][idx] += h
            down[name][idx] -= h
            numeric = (_loss(model, up)[0] - _loss(model, down)[0]) / (2 * h)
            assert abs(numeric - grads[name][idx]) < 1e-8, (name, idx)


@pytest.mark.parametrize("kw", CONFIGS[:3])
def test_the_backward_pass_equals_torch_autograd(kw):
    torch = pytest.importorskip("torch")
    model = Transformer(vocab=7, seq_len=5, **kw)
    params = _perturbed(model)
    loss, df = _loss(model, params)
    grads = backward(model, params, forward(model, params, TASK.tokens), df)
    tp = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in params.items()}
    tok = torch.tensor(TASK.tokens)
    B, S = TASK.tokens.shape
    n, H = 8, model.heads
    d = n // H

    def ln(h):
        c = h - h.mean(-1, keepdim=True)
        return c / torch.sqrt((c * c).mean(-1, keepdim=True) + model.norm_eps)

    act = {"relu": torch.relu, "tanh": torch.tanh}[model.phi]
    h = tp["E"].T[tok] + tp["P"].T[:S]
    for k in range(1, model.blocks + 1):
        q, kk, v = [(ln(h) @ tp[f"{m}{k}"].T).reshape(B, S, H, d).transpose(1, 2)
                    for m in "QKV"]
        logits = model.attn_mult * d ** -float(model.attention_exponent) * q @ kk.transpose(-1, -2)
        if model.causal:
            logits = logits.masked_fill(~torch.tril(torch.ones(S, S, dtype=bool)), -torch.inf)
        o = (torch.softmax(logits, -1) @ v).transpose(1, 2).reshape(B, S, n)
        h = h + model.branch * o @ tp[f"O{k}"].T
        h = h + model.branch * act(ln(h) @ tp[f"U{k}"].T) @ tp[f"D{k}"].T
    f = ln(h) @ tp["out"].T
    y = torch.tensor(TASK.targets)
    ref = (torch.nn.functional.cross_entropy(f[:, -1], y[:, -1]) if model.loss == "last"
           else torch.nn.functional.cross_entropy(f.reshape(-1, 7), y.reshape(-1)))
    ref.backward()
    assert abs(ref.item() - loss) < 1e-12
    for name, g in grads.items():
        assert np.max(np.abs(tp[name].grad.numpy() - g)) < 1e-12 * max(1, np.max(np.abs(g)))


def test_one_token_is_the_chain_of_matrices_it_becomes():
    """S = 1: the softmax over one key is 1, so a block is h + β W_O W_V N(h), then the MLP."""
    model = Transformer(vocab=7, seq_len=1, blocks=2, branch=0.7, phi="tanh")
    params = _perturbed(model, n=16)
    tokens = np.array([[3], [0], [6]])
    h = params["E"][:, tokens[:, 0]] + params["P"][:, :1]           # (n, B): one column each

    def norm(x):
        c = x - x.mean(axis=0)
        return c / np.sqrt((c * c).mean(axis=0) + model.norm_eps)

    for k in (1, 2):
        h = h + 0.7 * params[f"O{k}"] @ params[f"V{k}"] @ norm(h)
        h = h + 0.7 * params[f"D{k}"] @ np.tanh(params[f"U{k}"] @ norm(h))
    f = (params["out"] @ norm(h)).T
    assert np.max(np.abs(forward(model, params, tokens).f[:, 0, :] - f)) < 1e-12


def test_zero_queries_and_keys_average_the_values_of_the_prefix():
    """Logits all 0: causal attention is the mean of v over s' ≤ s."""
    model = Transformer(vocab=7, seq_len=5, mlp=False, heads=2)
    params = _perturbed(model, n=8)
    params["Q1"][...] = 0.0
    params["K1"][...] = 0.0
    h = params["E"].T[TASK.tokens] + params["P"].T[None]
    v = layer_norm(h, model.norm_eps)[0] @ params["V1"].T
    prefix = np.cumsum(v, axis=1) / np.arange(1, 6)[None, :, None]
    want = layer_norm(h + prefix @ params["O1"].T, model.norm_eps)[0] @ params["out"].T
    assert np.max(np.abs(forward(model, params, TASK.tokens).f - want)) < 1e-12


def test_blocks_without_attention_are_the_residual_mlp_engines_network():
    """attention='none' without positions: each position is a token through pre-norm MLP
    blocks, which is MLP(residual=Residual(α, γ, 2, phi_inside=True), norm='layer') on the
    one-hot words (the same draws, in the same order, and μP's effective rates).  Three SGD
    steps at width 32 agree to 1e-12, and so do the exact limits (φ = id), the NNGP and the
    tangent kernel."""
    import tp_limits as tp
    from tp_limits.limit.kernel.kernels import nngp, ntk
    from tp_limits.transformer import (simulate_transformer_limit, transformer_nngp,
                                       transformer_ntk)
    V, K, eye = 7, 2, np.eye(7)

    def pair(phi):
        model = Transformer(V, 5, blocks=K, attention="none", positions=False, phi=phi,
                            sigma=1.3, sigma_out=0.7, residual=Residual(0.5, 0.5, 2))
        net = tp.MLP(tp.mup(1 + 2 * K), V, V, phi=phi, sigma=[1.3] * (2 * K + 1) + [0.7],
                     residual=Residual(0.5, 0.5, 2, phi_inside=True), norm="layer",
                     norm_eps=model.norm_eps)
        return model, net

    rows = lambda tokens: np.tile(eye[tokens.ravel()], (3, 1))          # noqa: E731
    routine = tp.Routine(lr=0.4, X=rows(TASK.tokens), Y=rows(TASK.targets), loss="xent",
                         eval_inputs=eye[TASK.eval_tokens.ravel()],
                         batch_size=TASK.tokens.size, steps=3)
    model, net = pair("tanh")
    ours = train_transformer(model, TASK, 32, 0.4, steps=3, seed=5).f_eval
    mlp = tp.train_finite(net, routine, 32, seed=5).f_eval
    assert np.abs(ours[-1] - ours[0]).max() > 0.05                    # the steps moved f
    assert np.abs(ours.reshape(mlp.shape) - mlp).max() < 1e-12
    for ft, fm in ((transformer_nngp, nngp), (transformer_ntk, ntk)):
        assert np.abs(ft(model, TASK.eval_tokens) - fm(net, eye[TASK.eval_tokens.ravel()])
                      ).max() < 1e-12
    model, net = pair("id")
    exact = simulate_transformer_limit(model, TASK, 0.4, steps=3, method="exact").f_eval
    assert np.abs(exact.reshape(mlp.shape) - tp.simulate_limit(net, routine).f_eval
                  ).max() < 1e-12


@pytest.mark.parametrize("attention, zero_query, optimizer, initial, step_one", [
    ("1/d", False, Adam(), "-1/2", "0"), ("1/d", True, Adam(), None, "0"),
    ("1/sqrt(d)", False, Adam(), "0", "1/2"), ("1/d", False, SGD(), "-1/2", "-1/2"),
    ("1/sqrt(d)", True, SGD(), None, "1/2"),
])
def test_the_classifier_gives_the_attention_exponents(attention, zero_query, optimizer,
                                                      initial, step_one):
    from fractions import Fraction
    cls = classify_attention(Transformer(16, 8, attention=attention, zero_query=zero_query),
                             optimizer)
    assert cls.initial == (None if initial is None else Fraction(initial))
    assert cls.step_one == Fraction(step_one)
    assert cls.stable == (attention == "1/d")
    assert ("blow up like n^(1/2)" in cls.verdict) == (attention == "1/sqrt(d)")


@pytest.mark.parametrize("attention, optimizer, lr", [
    ("1/d", Adam(), 0.05), ("1/sqrt(d)", Adam(), 0.05), ("1/d", SGD(), 0.5),
    ("1/sqrt(d)", SGD(), 0.5)])
def test_the_coordinate_check_measures_the_logits_exponents(attention, optimizer, lr):
    """Zero queries (μP's advice): the first step's change of the logits has the
    classifier's slope within 0.1 over n = 128–2048 (4 seeds)."""
    task = markov_task(vocab=16, seq_len=8, n_train=16)
    model = Transformer(16, 8, attention=attention, zero_query=True, heads=2)
    cc = attention_coord_check(model, task, (128, 256, 512, 1024, 2048), lr, optimizer,
                               steps=1, seeds=4)
    slope, half = cc.slope("dlogits", 1)
    assert abs(cc.step_one_error()) < 0.1, (slope, half)
    assert abs(slope - float(cc.classification.step_one)) < half + 0.1
    assert np.all(cc.sizes["logits"][:, 0] == 0)                 # W_Q = 0: logits exactly 0


@pytest.mark.parametrize("attention, step_one", [("1/d", -1), ("1/sqrt(d)", 0)])
def test_the_ntk_parametrization_keeps_the_logits_still(attention, step_one):
    """param = 'ntk' (SGD, c = 1, b_out = ½): the first change is Θ(n^(1 − 2a)), n^(−1) with
    1/d — its attention stays uniform — and Θ(1) with 1/√d; the coordinate check's slope
    over n = 128–1024 (4 seeds) within 0.1 of it."""
    model = Transformer(16, 8, attention=attention, zero_query=True, heads=2, param="ntk")
    cls = classify_attention(model, SGD())
    assert cls.step_one == step_one and cls.stable and cls.initial is None
    task = markov_task(vocab=16, seq_len=8, n_train=16)
    cc = attention_coord_check(model, task, (128, 256, 512, 1024), 1.0, SGD(), steps=1,
                               seeds=4)
    assert abs(cc.step_one_error()) < 0.1, cc.slope("dlogits", 1)


def test_the_initial_logits_shrink_like_n_to_the_minus_half_with_1_over_d():
    task = markov_task(vocab=16, seq_len=8, n_train=8)
    cc = attention_coord_check(Transformer(16, 8), task, (64, 256, 1024), 0.1, SGD(),
                               steps=1, seeds=3)
    assert abs(cc.slope("logits", 0)[0] + 0.5) < 0.1


def test_training_lowers_the_loss_and_is_reproducible():
    task = markov_task(n_train=16, n_eval=8)
    model = Transformer(16, 8, blocks=2, heads=2)
    runs = [train_transformer(model, task, 64, 0.05, Adam(), steps=8, seed=3) for _ in range(2)]
    assert np.array_equal(runs[0].f_eval, runs[1].f_eval)
    run = runs[0]
    assert run.f_eval.shape == (9, 8 * 8, 16) and run.f_train.shape == (8, 16 * 8, 16)
    assert run.loss[-1] < run.loss[0] - 0.1 and run.status.complete
    last = train_transformer(Transformer(16, 8, loss="last"), task, 32, 0.5, steps=2)
    assert last.f_eval.shape == (3, 8, 16)


def test_a_divergence_names_the_step_and_block_and_keeps_what_finished():
    task = markov_task(n_train=8, n_eval=4)
    model = Transformer(16, 8, attention="1/sqrt(d)")
    with pytest.raises(DivergenceError, match="step 2: .*layer 1"):
        train_transformer(model, task, 64, 1e9, steps=5, divergence_bound=1e6)
    run = train_transformer(model, task, 64, 1e9, steps=5, on_divergence="stop",
                            divergence_bound=1e6)
    assert run.divergence.step == 2 and run.completed_steps == 1 and run.loss.shape == (1,)
    assert run.f_eval.shape[0] == 2


@pytest.mark.parametrize("loss", ["next_token", "last"])
def test_a_divergence_at_the_first_step_keeps_the_initial_outputs(loss):
    """Nothing finished but f_0: an empty run of the right shapes, not a crash."""
    model = Transformer(7, 5, loss=loss)
    run = train_transformer(model, TASK, 32, 1.0, steps=3, on_divergence="stop",
                            divergence_bound=1e-3)
    rows = 3 if loss == "last" else 15
    assert run.divergence.step == 1 and run.completed_steps == 0
    assert run.f_train.shape == (0, rows, 7) and run.f_eval.shape == (1, rows * 2 // 3, 7)


def test_ctrl_c_keeps_the_finished_steps(monkeypatch):
    import tp_limits.transformer.train as train
    interrupt_on_call(monkeypatch, train, "backward", 3)
    run = train_transformer(Transformer(16, 8), markov_task(n_train=4, n_eval=2), 16, 0.1,
                            steps=5)
    assert run.interrupted and run.completed_steps == 2 and run.f_eval.shape[0] == 3


@pytest.mark.parametrize("call, name", [
    (lambda: Transformer(16, 8, heads=3).head_width(64), "width = 64"),
    (lambda: Transformer(16, 8, attention="1/n"), "attention"),
    (lambda: Transformer(16, 8, param="ntp"), "param"),
    (lambda: Transformer(16, 8, blocks=-1), "blocks"),
    (lambda: Transformer(16, 8, attention="none", zero_query=True), "zero_query"),
    (lambda: Transformer(16, 8, residual=0.5), "residual must be a tp.Residual"),
    (lambda: Transformer(16, 8, residual=Residual(0.5)), "block_depth = 1"),
    (lambda: Transformer(16, 8, blocks=0, residual=Residual(0.5, 0, 2)), "blocks >= 1"),
    (lambda: Transformer(16, 8, blocks=2, residual=Residual(2000.0, 0, 2)), "alpha = 2000"),
    (lambda: train_transformer(Transformer(16, 8), markov_task(), 64, 0.1,
                               SGD(momentum=0.9)), "optimizer"),
    (lambda: train_transformer(Transformer(16, 8), markov_task(), 64, 0.1, Muon()),
     "optimizer"),
    (lambda: train_transformer(Transformer(12, 8), markov_task(), 64, 0.1), "vocab = 12"),
    (lambda: train_transformer(Transformer(16, 8, heads=3), markov_task(), 64, 0.1),
     "heads = 3"),
])
def test_bad_input_is_refused_by_name_before_work(call, name):
    with pytest.raises(SpecError, match=name.replace("(", r"\(")):
        call()


@pytest.mark.parametrize("optimizer", [SGD(), Adam()], ids=["sgd", "adam"])
def test_a_residual_rule_scales_the_branches_and_the_hidden_rates(optimizer):
    """Residual(α, γ) over K = 3 blocks: the network is the one with branch β K^(−α), and
    its first step moves the hidden matrices by K^(−γ) times that network's step, the
    embeddings and the readout by the same step (docs/theory.md §17.1)."""
    model = Transformer(7, 5, blocks=3, heads=2, branch=0.8,
                        residual=Residual(1.0, 0.5, block_depth=2))
    plain = Transformer(7, 5, blocks=3, heads=2, branch=0.8 / 3)
    moved = []
    for m in (model, plain):
        params = init_params(m, 16, np.random.default_rng(0))
        fw = forward(m, params, TASK.tokens)
        moved.append(fw.f)
        _, df = loss_and_gradient(m, fw.f, TASK.targets)
        step = {k: np.zeros_like(v) for k, v in params.items()}   # the step itself, exactly
        Stepper(m, optimizer, 0.3, 16, params).step(step, backward(m, params, fw, df), 1)
        moved.append(step)
    assert np.array_equal(moved[0], moved[2])
    for name, kind in model.parameter_kinds().items():
        factor = 3 ** -0.5 if kind == "hidden" else 1.0
        assert np.abs(moved[3][name]).max() > 0
        assert np.allclose(moved[1][name], factor * moved[3][name], rtol=1e-12, atol=0)


def test_the_classifier_refuses_what_it_does_not_derive():
    with pytest.raises(UnsupportedError, match="param = 'sp'"):
        classify_attention(Transformer(16, 8, param="sp"), Adam())
    with pytest.raises(UnsupportedError, match="no logits"):
        classify_attention(Transformer(16, 8, attention="none"), Adam())


def test_the_markov_task_is_a_shifted_chain_of_its_order():
    task = markov_task(vocab=5, seq_len=6, order=1, n_train=200, n_eval=10, alpha=0.05,
                       seed=2)
    again = markov_task(vocab=5, seq_len=6, order=1, n_train=200, n_eval=10, alpha=0.05,
                        seed=2)
    assert np.array_equal(task.tokens, again.tokens)
    assert np.array_equal(task.tokens[:, 1:], task.targets[:, :-1])
    assert 0 <= task.entropy < np.log(5)
    # with α = 0.05 most contexts have a dominant next word: the chain is far from uniform
    pairs = np.zeros((5, 5))
    np.add.at(pairs, (task.tokens.ravel(), task.targets.ravel()), 1)
    assert np.mean(pairs.max(axis=1) / pairs.sum(axis=1)) > 0.5


@pytest.mark.parametrize("kw, optimizer", [
    (dict(blocks=2, heads=2, phi="tanh"), SGD()),
    (dict(phi="relu", loss="last", causal=False), Adam()),
    (dict(param="ntk", zero_query=True, phi="erf"), SGD()),
    (dict(tied=True, sigma_out=1.5, blocks=2), Adam()),
    (dict(blocks=2, residual=Residual.depth_mup("adam", block_depth=2)), Adam())],
    ids=["sgd", "adam", "ntk", "tied", "residual"])
def test_the_torch_transformer_trains_as_this_package_does(kw, optimizer):
    """transformer_to_torch: torch's module and optimizer take the same four steps as
    train_transformer, to 1e-13."""
    pytest.importorskip("torch")
    from tp_limits.interop import transformer_to_torch
    model = Transformer(7, 5, **kw)
    ref = train_transformer(model, TASK, 32, 0.3, optimizer, steps=4, seed=2).f_eval
    out = transformer_to_torch(model, 32, 0.3, optimizer, seed=2).train(TASK, 4)
    assert np.abs(out - ref).max() < 1e-13 * np.abs(ref).max()
    assert np.abs(ref[-1] - ref[0]).max() > 0.01          # the steps moved f


def test_a_tied_readout_is_mup_s_and_has_no_kernel_here():
    """tied=True: W_out = (σ_out/n) Eᵀ, so no readout parameter of its own; μP only; the
    kernels (derived for an independent readout) refuse it."""
    from tp_limits.transformer import transformer_ntk
    model = Transformer(7, 5, tied=True)
    assert "out" not in model.parameter_kinds()
    with pytest.raises(SpecError, match="tied=True with param = 'sp'"):
        Transformer(7, 5, tied=True, param="sp")
    with pytest.raises(UnsupportedError, match="tied=True"):
        transformer_ntk(model, TASK.tokens)
