"""The infinite-width limit of a μP transformer under SGD (tp_limits.transformer.limit):
finite networks converge to it like n^(−1/2), heads collapse, and what is not simulated
is refused with the reason before any work."""
import numpy as np
import pytest
from conftest import interrupt_on_call, t_quantile, welch_dof

from tp_limits import SGD, Adam, Residual
from tp_limits.errors import MemoryBudgetError, SpecError, UnsupportedError
from tp_limits.transformer import (Transformer, markov_task, simulate_transformer_limit,
                                   train_transformer)

TASK = markov_task(vocab=8, seq_len=4, n_train=4, n_eval=2, seed=1)
WIDTHS = (128, 256, 512, 1024)


@pytest.mark.parametrize("kw", [dict(heads=2, phi="tanh"),
                                dict(blocks=2, phi="relu", zero_query=True, causal=False,
                                     loss="last", tied=True, sigma_out=0.5),
                                dict(blocks=2, phi="tanh", residual=Residual(0.5, -2.0, 2))],
                         ids=["one-block-two-heads", "two-blocks-zero-query-tied",
                              "two-blocks-residual"])
def test_finite_transformers_converge_to_the_limit(kw):
    """The rms distance of 8 networks to the limit falls like n^(−1/2) (slope within
    0.15), and at the widest width the seeds' mean lies within the combined standard error
    (seeds − 1 and replicates − 1 degrees of freedom): the rms of the z-scores over every
    output after step 0 is below 2 (about 1 when the mean is unbiased)."""
    model = Transformer(8, 4, **kw)
    limit = simulate_transformer_limit(model, TASK, 0.5, steps=3, particles=4096,
                                       replicates=8)
    assert limit.status.se_dof == 7
    rms = []
    for n in WIDTHS:
        fs = np.stack([train_transformer(model, TASK, n, 0.5, steps=3, seed=s).f_eval
                       for s in range(8)])
        rms.append(np.sqrt(np.mean((fs - limit.f_eval[None]) ** 2)))
    slope = np.polyfit(np.log(WIDTHS), np.log(rms), 1)[0]
    assert abs(slope + 0.5) < 0.15, (slope, rms)
    se = np.sqrt(fs.std(axis=0, ddof=1) ** 2 / len(fs) + limit.f_eval_se ** 2)
    z = (fs.mean(axis=0) - limit.f_eval)[1:] / se[1:]
    assert np.sqrt(np.mean(z ** 2)) < 2.0, np.sqrt(np.mean(z ** 2))
    assert limit.loss[-1] < limit.loss[0]


def test_the_limit_does_not_depend_on_the_heads_and_is_reproducible():
    runs = [simulate_transformer_limit(Transformer(8, 4, heads=h), TASK, 0.5, steps=2,
                                       particles=512, replicates=2, seed=3) for h in (1, 4, 1)]
    assert np.array_equal(runs[0].f_eval, runs[1].f_eval)
    assert np.array_equal(runs[0].f_eval, runs[2].f_eval)
    assert abs(runs[0].f_eval[0]).max() < 6 * runs[0].f_eval_se[0].max()   # f_0 = 0 at ∞


@pytest.mark.parametrize("model, optimizer, why", [
    (Transformer(8, 4, attention="1/sqrt(d)"), SGD(), "blow up like n\\^\\(1/2\\)"),
    (Transformer(8, 4, param="sp"), SGD(), "param = 'sp'"),
    (Transformer(8, 4), Adam(), "Adam"),
])
def test_what_has_no_simulated_limit_is_refused_with_the_reason(model, optimizer, why):
    with pytest.raises(UnsupportedError, match=why):
        simulate_transformer_limit(model, TASK, 0.5, optimizer, steps=2, particles=256)


def test_a_limit_beyond_memory_and_bad_arguments_are_refused_before_work():
    with pytest.raises(MemoryBudgetError, match="particles"):
        simulate_transformer_limit(Transformer(8, 4), TASK, 0.5, steps=50,
                                   particles=10 ** 9)
    with pytest.raises(SpecError, match="replicates"):
        simulate_transformer_limit(Transformer(8, 4), TASK, 0.5, replicates=1)
    with pytest.raises(SpecError, match="vocab = 16"):
        simulate_transformer_limit(Transformer(16, 4), TASK, 0.5)


def test_a_diverging_limit_names_the_step():
    from tp_limits.errors import DivergenceError
    with pytest.raises(DivergenceError, match="step [0-9]+"):
        simulate_transformer_limit(Transformer(8, 4), TASK, 1e150, steps=4, particles=256,
                                   replicates=2)
    run = simulate_transformer_limit(Transformer(8, 4), TASK, 1e150, steps=4, particles=256,
                                     replicates=2, on_divergence="stop")
    assert run.divergence.step == 3 and run.completed_steps == 1
    assert run.f_eval.shape[0] == 2 and np.all(np.isfinite(run.f_eval))


def test_ctrl_c_keeps_the_finished_replicates(monkeypatch):
    import tp_limits.transformer.limit as lim
    interrupt_on_call(monkeypatch, lim, "_replicate", 3)
    run = simulate_transformer_limit(Transformer(8, 4), TASK, 0.5, steps=2, particles=256,
                                     replicates=4)
    assert run.interrupted and run.meta["replicates"] == 2 and run.status.se_dof == 1
    monkeypatch.setattr(lim, "_replicate", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        simulate_transformer_limit(Transformer(8, 4), TASK, 0.5, steps=2, particles=256)


@pytest.mark.parametrize("kw", [dict(heads=2), dict(blocks=2, causal=False, zero_query=True,
                                                   tied=True)],
                         ids=["one-block", "two-blocks-zero-query-tied"])
def test_the_exact_linear_limit_equals_monte_carlo(kw):
    """φ = id with LayerNorm and softmax attention: the exact engine (coefficient vectors
    over Gaussian primitives) and Monte Carlo (8192 particles × 16 replicates) agree within
    the t bound at every step.  z = (MC − exact)/SE is t-distributed on 15 degrees of
    freedom: E z² = 15/13 and sd(z²) = 1.84; the outputs share their 16 replicates, so
    their mean z² has about 16 independent parts, sd ≈ 0.46, and 5 of those above 15/13
    is 3.45."""
    model = Transformer(8, 4, phi="id", **kw)
    exact = simulate_transformer_limit(model, TASK, 0.5, steps=3, method="exact")
    assert exact.f_eval_se is None and exact.status.se_dof is None
    mc = simulate_transformer_limit(model, TASK, 0.5, steps=3, particles=8192, replicates=16)
    z = ((mc.f_eval - exact.f_eval) / mc.f_eval_se)[1:]
    assert np.mean(z ** 2) < 3.45, np.mean(z ** 2)
    assert np.abs(exact.f_eval[-1] - exact.f_eval[0]).max() > 0.05       # it learned


def test_finite_linear_transformers_converge_to_the_exact_limit():
    """Against the exact limit the only error bar is the seeds': the networks' rms distance
    falls like n^(−1/2) and their mean at n = 1024 is within the seeds' standard error."""
    model = Transformer(8, 4, phi="id", heads=2)
    exact = simulate_transformer_limit(model, TASK, 0.5, steps=3, method="exact")
    rms = []
    for n in WIDTHS:
        fs = np.stack([train_transformer(model, TASK, n, 0.5, steps=3, seed=s).f_eval
                       for s in range(8)])
        rms.append(np.sqrt(np.mean((fs - exact.f_eval[None]) ** 2)))
    assert abs(np.polyfit(np.log(WIDTHS), np.log(rms), 1)[0] + 0.5) < 0.15, rms
    z = ((fs.mean(axis=0) - exact.f_eval) / (fs.std(axis=0, ddof=1) / np.sqrt(8)))[1:]
    assert np.sqrt(np.mean(z ** 2)) < 2.0


def test_the_exact_engine_refuses_a_nonlinearity():
    with pytest.raises(UnsupportedError, match="phi = 'id'"):
        simulate_transformer_limit(Transformer(8, 4, phi="tanh"), TASK, 0.5, method="exact")


def test_a_learning_rate_sweep_with_the_limit_as_its_last_width():
    import math

    from tp_limits.transformer import transformer_lr_sweep
    lrs = (0.25, 1.0, 4.0, 64.0)
    sweep = transformer_lr_sweep(Transformer(8, 4), TASK, (16, 32), lrs, steps=2, seeds=2,
                                 limit=True, particles=256, progress=False)
    assert sweep.widths == (16, 32, math.inf) and sweep.costs.shape == (3, 4, 2)
    for i, n in enumerate(sweep.widths[:2]):         # the finite rows are train_transformer's
        run = train_transformer(Transformer(8, 4), TASK, n, 4.0, steps=2, seed=1)
        assert sweep.costs[i, 2, 1] == run.loss[-1]
    limit = simulate_transformer_limit(Transformer(8, 4), TASK, 1.0, steps=2, particles=256,
                                       replicates=2)
    assert np.array_equal(sweep.costs[2, 1], limit.stats["loss_replicates"][:, -1])
    with pytest.raises(UnsupportedError, match="limit=True: Adam"):
        transformer_lr_sweep(Transformer(8, 4), TASK, (16,), lrs, Adam(), limit=True)


def test_ctrl_c_keeps_the_finished_widths_of_a_sweep(monkeypatch):
    import tp_limits.transformer.lr_sweep as sw
    real = sw.train_transformer

    def run(model, task, n, *args, **kw):
        if n == 32:
            raise KeyboardInterrupt
        return real(model, task, n, *args, **kw)

    monkeypatch.setattr(sw, "train_transformer", run)
    with pytest.warns(UserWarning, match="holds the 1 widths that had finished of 2"):
        out = sw.transformer_lr_sweep(Transformer(8, 4), TASK, (16, 32), (0.5, 1.0, 2.0),
                                      steps=2, seeds=2, progress=False)
    assert out.interrupted and out.widths == (16,) and out.costs.shape == (1, 3, 2)


def test_in_the_sgd_limit_the_logits_first_move_at_the_second_step():
    """theory §17.3: at initialization ∂p = E[Z^{nδo} Z^v] = 0 (independent matrices), so the
    first SGD step leaves W_Q, W_K and the logits where they were (0 under 1/d); once W_V and
    W_O have moved the logits move.  Exactly, with φ = id."""
    from tp_limits.transformer.coefficients import CoefficientSpace
    from tp_limits.transformer.limit import TransformerLimit, primitive_count
    model = Transformer(8, 4, phi="id")
    run = TransformerLimit(model, TASK, 0.5, CoefficientSpace(primitive_count(model, TASK, 4)))
    sizes = []
    for t in range(1, 5):
        f, caches = run.forward(TASK.tokens, TASK.tokens.size, t)
        c = caches[0][0]
        sizes.append(np.abs(run.space.moments(c["q"], c["k"])).max())
        run.step(f, caches, t)
    assert sizes[0] == 0 and sizes[1] < 1e-12 and sizes[2] > 1e-4 and sizes[3] > sizes[2]


def test_under_adam_the_logits_stay_random_as_the_width_grows():
    """Why Adam's limit is refused (docs/theory.md §17.4): after two Adam steps the logits'
    spread across 6 seeds does not shrink from n = 128 to 1024 (ratio above 0.6), while
    after two SGD steps it falls like n^(−½) (ratio below 0.55; √(1/8) = 0.35)."""
    from tp_limits.transformer.network import backward, forward, init_params
    from tp_limits.transformer.train import Stepper, loss_and_gradient
    model = Transformer(8, 4, heads=2, phi="tanh", zero_query=True)

    def spread(optimizer, lr, n):
        logits = []
        for s in range(6):
            params = init_params(model, n, np.random.default_rng(s))
            stepper = Stepper(model, optimizer, lr, n, params)
            for t in (1, 2):
                fw = forward(model, params, TASK.tokens)
                stepper.step(params, backward(model, params, fw,
                                              loss_and_gradient(model, fw.f, TASK.targets)[1]), t)
            logits.append(forward(model, params, TASK.tokens).logits[0].ravel())
        return np.std(logits, axis=0).mean()

    adam = spread(Adam(), 0.05, 1024) / spread(Adam(), 0.05, 128)
    sgd = spread(SGD(), 0.5, 1024) / spread(SGD(), 0.5, 128)
    assert adam > 0.6 and sgd < 0.55, (adam, sgd)


def test_without_attention_two_independent_limit_engines_agree():
    """attention='none', no positions: the transformer's particle engine and the MLP's deep
    Monte Carlo engine (Stein's Ż) simulate the same limit (the finite networks agree to
    1e-12, tests/test_transformer.py); their means agree within the t bound of the
    combined standard error (Welch's dof) at every output after every step, and the MLP
    with φ on the stream instead lies outside it."""
    import tp_limits as tp
    V, K, T, eye = 8, 2, 3, np.eye(8)
    model = Transformer(V, 4, blocks=K, attention="none", positions=False, phi="tanh",
                        residual=Residual(0.5, 0.0, 2))
    rows = lambda tokens: np.tile(eye[tokens.ravel()], (T, 1))          # noqa: E731
    routine = tp.Routine(lr=0.5, X=rows(TASK.tokens), Y=rows(TASK.targets), loss="xent",
                         eval_inputs=eye[TASK.eval_tokens.ravel()],
                         batch_size=TASK.tokens.size, steps=T)
    ours = simulate_transformer_limit(model, TASK, 0.5, steps=T, particles=4096,
                                      replicates=8)

    def mlp_limit(inside):
        net = tp.MLP(tp.mup(1 + 2 * K), V, V, phi="tanh", norm="layer",
                     residual=Residual(0.5, 0.0, 2, phi_inside=inside))
        return tp.simulate_limit(net, routine, particles=4096, replicates=8, progress=False)

    mlp = mlp_limit(True)
    f, se_ours = ours.f_eval.reshape(mlp.f_eval.shape), ours.f_eval_se.reshape(mlp.f_eval.shape)
    se = np.hypot(se_ours, mlp.f_eval_se)[1:]
    q = t_quantile(welch_dof(se_ours[1:], 7, mlp.f_eval_se[1:], 7))
    assert np.abs(f[-1] - f[0]).max() > 0.1                            # training moved f
    assert np.all(np.abs(f[1:] - mlp.f_eval[1:]) <= q * se)
    assert np.any(np.abs(f[1:] - mlp_limit(False).f_eval[1:]) > q * se)
