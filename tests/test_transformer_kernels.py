"""The kernel regime of a transformer with 1/d attention (tp_limits.transformer.kernels,
.empirical_ntk, .kernel_descent): the limiting NNGP and tangent kernel against finite
networks (within the t bound of their seeds), against the feature-learning limit's first
step, and kernel gradient descent against finite NTK-parametrized networks."""
import numpy as np
import pytest
from scipy.stats import t as student

from tp_limits import Residual
from tp_limits.errors import MemoryBudgetError, SpecError, UnsupportedError
from tp_limits.transformer import (Transformer, empirical_transformer_ntk, markov_task,
                                   simulate_transformer_limit, train_transformer,
                                   transformer_initial_outputs, transformer_kernel_descent,
                                   transformer_nngp, transformer_ntk)
from tp_limits.transformer.network import forward, init_params
from tp_limits.transformer.train import loss_and_gradient

TOKENS = np.random.default_rng(1).integers(5, size=(3, 3))
TASK = markov_task(vocab=6, seq_len=4, n_train=4, n_eval=3, seed=0)


def _t_check(samples, limit):
    """(max |z| over the entries, its Bonferroni bound at 0.1 % on seeds − 1 dof, the
    largest standard error relative to the kernel's scale).  Entries that are the same in
    every sample (no shared word between two sequences: exactly 0) must equal the limit."""
    m = len(samples)
    mean, se = samples.mean(axis=0), samples.std(axis=0, ddof=1) / np.sqrt(m)
    fixed = se == 0
    assert np.array_equal(mean[fixed], limit[fixed])
    z = (mean - limit)[~fixed] / se[~fixed]
    bound = student.ppf(1 - 0.001 / (2 * z.size), m - 1)
    return np.abs(z).max(), bound, se.max() / np.abs(limit).max()


def _per_word(K, V):
    """K ⊗ I_V in the layout (R, V, R, V) of a finite network's kernel."""
    return np.einsum("ab,vw->avbw", K, np.eye(V))


@pytest.mark.parametrize("kw", [dict(param="mup", blocks=2, heads=2, phi="tanh"),
                                dict(param="ntk", phi="relu", causal=False, zero_query=True),
                                dict(param="ntk", blocks=2, phi="tanh", zero_query=True,
                                     residual=Residual(1.0, -1.0, 2))],
                         ids=["mup-two-blocks-two-heads", "ntk-zero-query", "ntk-residual"])
def test_the_empirical_tangent_kernel_converges_to_the_limiting_one(kw):
    """At n = 1024 the mean of 16 networks' kernels equals the limit within the t bound
    (15 dof, Bonferroni over the entries), share by share, with standard errors under 5 %
    of the kernel (so an O(1) error would show) — the words' cross terms, 0 in the limit,
    included; the queries' and keys' shares, 0 in the limit too, fall like n^(−1) (fitted
    from n = 256 to 1024, within 0.15)."""
    model = Transformer(5, 3, **kw)
    limit = {p: _per_word(K, 5)
             for p, K in transformer_ntk(model, TOKENS, components=True).items()}
    runs = [empirical_transformer_ntk(model, TOKENS, 1024, seed=s, components=True)
            for s in range(16)]
    assert list(limit) == list(runs[0]) == list(model.parameter_kinds())
    for name in limit:
        if name[0] in "QK":
            continue
        z, bound, rel = _t_check(np.stack([r[name] for r in runs]), limit[name])
        assert z < bound and rel < 0.05, (name, z, bound, rel)
    total = np.stack([sum(r.values()) for r in runs])
    z, bound, rel = _t_check(total, _per_word(transformer_ntk(model, TOKENS), 5))
    assert z < bound and rel < 0.05, (z, bound, rel)
    if not model.zero_query:
        qk = lambda runs: np.mean([abs(r["Q1"]).max() + abs(r["K1"]).max()  # noqa: E731
                                   for r in runs])
        small = [empirical_transformer_ntk(model, TOKENS, 256, seed=s, components=True)
                 for s in range(16)]
        slope = np.log(qk(runs) / qk(small)) / np.log(4)
        assert abs(slope + 1) < 0.15, slope


def test_the_nngp_is_the_covariance_of_the_final_features():
    """σ_out² × the final norm's Gram over 48 seeds at n = 512: within the t bound."""
    model = Transformer(5, 3, blocks=2, heads=2, phi="erf", sigma_out=1.5)
    grams = []
    for s in range(48):
        a = forward(model, init_params(model, 512, np.random.default_rng(s)),
                    TOKENS).final[0].reshape(TOKENS.size, -1)
        grams.append(1.5 ** 2 * a @ a.T / 512)
    z, bound, rel = _t_check(np.stack(grams), transformer_nngp(model, TOKENS))
    assert z < bound and rel < 0.03, (z, bound, rel)


@pytest.mark.parametrize("param", ["mup", "ntk"])
def test_one_sgd_step_moves_a_finite_network_by_its_own_kernel(param):
    """f_1 − f_0 = −η K χ_0 + O(η²) at width 256: (f_1 − f_0)/η extrapolated to η → 0 from
    η = 1e-4 and 2e-4 (Richardson, error O(η²)) within 1e-6 of the scale."""
    model = Transformer(6, 4, blocks=2, heads=2, phi="tanh", param=param)
    both = np.concatenate([TASK.tokens, TASK.eval_tokens])
    K = empirical_transformer_ntk(model, both, 256, seed=3)
    f0 = transformer_initial_outputs(model, TASK, 256, seed=3)
    B = len(TASK.tokens)
    _, chi = loss_and_gradient(model, f0[:B], TASK.targets)
    predicted = -np.einsum("avbw,bw->av", K[B * 4:, :, :B * 4], chi.reshape(-1, 6))
    quotient = {eta: np.diff(train_transformer(model, TASK, 256, eta, steps=1,
                                               seed=3).f_eval, axis=0)[0] / eta
                for eta in (1e-4, 2e-4)}
    moved = 2 * quotient[1e-4] - quotient[2e-4]
    assert np.abs(moved - predicted).max() < 1e-6 * np.abs(predicted).max()


def test_the_mup_limits_first_step_is_the_kernel_step():
    """The exact feature-learning limit (φ = id) after one step of rate η: (f_1 − f_0)/η
    = −K χ_0 + O(η²); at η = 1e-4 within 1e-7 of the scale, for two blocks with LayerNorm
    and causal softmax attention — an independent computation of K."""
    model = Transformer(6, 4, blocks=2, phi="id")
    both = np.concatenate([TASK.tokens, TASK.eval_tokens])
    R = TASK.tokens.size
    K = transformer_ntk(model, both)[R:, :R]
    _, chi = loss_and_gradient(model, np.zeros(TASK.tokens.shape + (6,)), TASK.targets)
    predicted = -(K @ chi.reshape(R, 6))
    run = simulate_transformer_limit(model, TASK, 1e-4, steps=1, method="exact")
    moved = (run.f_eval[1] - run.f_eval[0]) / 1e-4
    assert np.abs(moved - predicted).max() < 1e-7 * np.abs(predicted).max()


def test_ntk_parametrized_networks_converge_to_kernel_descent():
    """Started from each network's own f_0, kernel gradient descent tracks 8 NTK networks
    over 10 steps at a distance falling like n^(−1/2): the slope from n = 128 to 1024
    within 5 standard errors (from the seeds' spread), which are under 0.06."""
    model = Transformer(6, 4, phi="tanh", param="ntk")
    gaps = {}
    for n in (128, 1024):
        gaps[n] = []
        for s in range(8):
            f0 = transformer_initial_outputs(model, TASK, n, seed=s)
            kernel = transformer_kernel_descent(model, TASK, 1.0, steps=10, f0=f0)
            net = train_transformer(model, TASK, n, 1.0, steps=10, seed=s)
            gaps[n].append(np.sqrt(np.mean((kernel.f_eval - net.f_eval) ** 2)))
        assert net.loss[-1] < net.loss[0] and kernel.loss[-1] < kernel.loss[0]
    g = {n: np.array(v) for n, v in gaps.items()}
    slope = np.log(g[1024].mean() / g[128].mean()) / np.log(8)
    se = np.sqrt(sum((v.std(ddof=1) / v.mean()) ** 2 / len(v) for v in g.values())) / np.log(8)
    assert abs(slope + 0.5) < 5 * se and se < 0.06, (slope, se)


def test_kernel_descent_from_zero_is_deterministic_and_decreases_the_loss():
    model = Transformer(6, 4, phi="tanh", param="ntk")
    a = transformer_kernel_descent(model, TASK, 1.0, steps=5)
    b = transformer_kernel_descent(model, TASK, 1.0, steps=5)
    assert np.array_equal(a.f_eval, b.f_eval)
    assert a.f_eval.shape == (6, 3 * 4, 6) and a.f_train.shape == (5, 4 * 4, 6)
    assert np.all(np.diff(a.loss) < 0)
    assert np.array_equal(a.f_eval[0], np.zeros((12, 6)))


@pytest.mark.parametrize("call, error, match", [
    (lambda: transformer_ntk(Transformer(5, 3, attention="1/sqrt(d)"), TOKENS),
     UnsupportedError, "random softmax"),
    (lambda: transformer_ntk(Transformer(5, 3, param="sp"), TOKENS),
     UnsupportedError, "grows like n"),
    (lambda: transformer_nngp(Transformer(5, 3), TOKENS + 3), SpecError, "tokens has words"),
    (lambda: transformer_nngp(Transformer(5, 2), TOKENS), SpecError, "seq_len = 2"),
    (lambda: transformer_ntk(Transformer(5, 3), TOKENS.astype(float)), SpecError, "int"),
    (lambda: empirical_transformer_ntk(Transformer(5, 3, heads=3), TOKENS, 64), SpecError,
     "multiple of heads"),
    (lambda: transformer_kernel_descent(Transformer(6, 4), TASK, 1.0, f0=np.zeros(3)),
     SpecError, "f0 must be"),
    (lambda: simulate_transformer_limit(Transformer(6, 4, param="ntk"), TASK, 1.0),
     UnsupportedError, "kernel regime"),
    (lambda: transformer_ntk(Transformer(5, 64), np.zeros((4000, 64), int)),
     MemoryBudgetError, "tangent kernel on 256000 rows"),
    (lambda: empirical_transformer_ntk(Transformer(5, 64), np.zeros((400, 64), int), 4096),
     MemoryBudgetError, "tangent kernel at width 4096"),
], ids=["1/sqrt(d)", "sp", "word-out-of-vocab", "too-long", "float-tokens", "heads",
        "f0-shape", "ntk-limit", "limit-memory", "finite-memory"])
def test_what_has_no_kernel_is_refused_with_the_reason(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_the_ntk_parametrization_trains_with_sgd_only():
    from tp_limits import Adam
    with pytest.raises(SpecError, match="param = 'ntk' with adam"):
        train_transformer(Transformer(6, 4, param="ntk"), TASK, 64, 1.0, Adam())


def test_a_diverging_kernel_descent_names_the_step_or_keeps_the_steps_before_it():
    """At an absurd rate the outputs pass the divergence bound at the first step: raised
    with the step, or with on_divergence='stop' the finished steps come back with the
    divergence recorded."""
    from tp_limits.errors import DivergenceError
    model = Transformer(6, 4, phi="tanh", param="ntk")
    with pytest.raises(DivergenceError, match="step 1"):
        transformer_kernel_descent(model, TASK, 1e12, steps=5)
    run = transformer_kernel_descent(model, TASK, 1e12, steps=5, on_divergence="stop")
    T = run.status.completed_steps
    assert run.status.divergence is not None and T == 0
    assert run.f_eval.shape[0] == T + 1 and len(run.loss) == T
    assert np.all(np.isfinite(run.f_eval))
