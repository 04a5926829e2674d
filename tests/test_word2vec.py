"""Word2Vec (CBOW, negative sampling) in the package's terms: its sparse engines against the
generic engines on the same dense problem, the example stream, the analogy metric, and
finite widths approaching the exact limit (docs/theory.md §15.2–15.4)."""
import math

import numpy as np
import pytest

import tp_limits as tp
from tp_limits.losses import get_loss
from tp_limits.tasks import (CBOWStream, Questions, Vocabulary, analogy_scores, cbow_network,
                             train_cbow)
from tp_limits.tasks.corpus import clean_wiki, tokenize
from conftest import interrupt_on_call


def zipf_corpus(V=12, n=3000, seed=1):
    rng = np.random.default_rng(seed)
    return [f"w{int(i)}" for i in np.minimum(rng.zipf(1.3, n), 3 * V)]


def dense_routine(stream, V, lr):
    pairs = [b.dense(V) for b in stream.batches()]
    X = np.vstack([x for x, _ in pairs])
    Y = np.vstack([y for _, y in pairs])
    return tp.Routine(X, Y, lr=lr, loss="sgns", batch_size=stream.batch_size,
                      eval_inputs=np.eye(V))


@pytest.fixture(scope="module")
def small():
    toks = zipf_corpus()
    vocab = Vocabulary.build(toks, 12)
    stream = CBOWStream.of(vocab, toks, window=2, negatives=3, batch_size=16, sample=0,
                           seed=3)
    return vocab, stream


def test_sgns_loss_gradient_is_the_derivative_of_its_value():
    loss = get_loss("sgns")
    rng = np.random.default_rng(0)
    f = rng.normal(size=(4, 6)) * 3
    y = np.array([[1, -1, 0, -2, 0, 0]] * 4, dtype=float)
    h = 1e-6
    num = np.stack([(loss.value(f + h * e, y, np) - loss.value(f - h * e, y, np)) / (2 * h)
                    for e in np.eye(6)], axis=1)
    assert np.allclose(num, loss.grad(f, y, np), atol=1e-8)
    # the values at a positive and a negative output: -log σ(f), -2 log σ(-f)
    assert loss.value(np.array([[0.3, 0.7]]), np.array([[1.0, -2.0]]), np)[0] == pytest.approx(
        np.log1p(np.exp(-0.3)) + 2 * np.log1p(np.exp(0.7)), rel=1e-14)
    # no overflow at large |f|
    assert np.isfinite(loss.value(np.array([[800.0, -800.0]]), np.array([[-1.0, 1.0]]), np)).all()


@pytest.mark.parametrize("param,limit,engine", [(tp.mup(1), "feature", "exact linear"),
                                                (tp.ntp(1), "gp", "kernel")])
def test_limit_equals_the_generic_engine(small, param, limit, engine):
    vocab, stream = small
    V = len(vocab)
    net = cbow_network(param, V)
    run = train_cbow(net, stream, 0.5, math.inf, limit=limit)
    ref = tp.simulate_limit(net, dense_routine(stream, V, 0.5))
    assert run.status.complete and run.status.completed_steps == stream.steps
    scale = np.abs(ref.f_eval[-1]).max()
    assert scale > 0.5                                 # it learned something
    assert np.abs(ref.f_eval[-1] - run.output(np.eye(V))).max() <= 1e-12 * scale
    assert np.abs(ref.loss - run.loss).max() <= 1e-12


def test_finite_network_equals_train_finite(small):
    vocab, stream = small
    V, n = len(vocab), 48
    net = cbow_network(tp.mup(1), V)
    ref = tp.train_finite(net, dense_routine(stream, V, 0.5), n, seed=4, keep_weights=True)
    W1, W2 = ref.weights.initial
    run = train_cbow(net, stream, 0.5, n, init=(W1.T, W2))
    F1, F2 = ref.weights.final
    assert np.abs(run.embeddings - F1.T).max() <= 1e-12 * np.abs(F1).max()
    assert np.abs(run.outputs - F2).max() <= 1e-12 * np.abs(F2).max()
    assert np.abs(ref.loss - run.loss).max() <= 1e-12


def test_stream_follows_the_sampling_rules():
    toks = zipf_corpus(V=30, n=20000, seed=2) + ["rare"]
    vocab = Vocabulary.build(toks, 30)
    assert vocab.counts[0] >= vocab.counts[-1] and "rare" not in vocab.words
    stream = CBOWStream.of(vocab, toks, window=3, negatives=4, batch_size=32, sample=1e-2,
                           seed=5)
    batches = list(stream.batches())
    assert len(batches) == stream.steps
    again = list(CBOWStream.of(vocab, toks, window=3, negatives=4, batch_size=32,
                               sample=1e-2, seed=5).batches())
    assert all(np.array_equal(a.context, b.context) and np.array_equal(a.negatives, b.negatives)
               for a, b in zip(batches, again))                 # deterministic for a seed
    ctx = np.vstack([b.context for b in batches])
    assert ctx.shape[1] == 6 and (ctx >= 0).any(axis=1).all() and ctx.max() < 30
    neg = np.vstack([b.negatives for b in batches])
    tgt = np.concatenate([b.target for b in batches])
    w = np.vstack([b.weights for b in batches])
    assert np.array_equal(w == 0, neg == tgt[:, None])          # a draw of the target skipped
    # the most frequent word is subsampled: it is a smaller share of the targets than of
    # the corpus; a rare word keeps its count
    share = np.mean(tgt == 0)
    corpus = vocab.counts[0] / vocab.counts.sum()
    assert share < 0.8 * corpus
    # negatives follow the unigram^(3/4) law: chi-square over the 30 words
    counts = np.bincount(neg.reshape(-1), minlength=30)
    expected = stream.noise * counts.sum()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 29 + 5 * np.sqrt(2 * 29)                      # 29 dof, 5σ


def test_dense_view_matches_the_batch(small):
    vocab, stream = small
    b = next(stream.batches())
    X, Y = b.dense(len(vocab))
    assert np.allclose(X.sum(axis=1), 1.0)
    assert np.all(Y[np.arange(len(b)), b.target] == 1.0)
    assert np.allclose(-Y.clip(max=0).sum(axis=1), b.weights.sum(axis=1))


def test_wiki_markup_is_stripped():
    text = ("'''Paris''' is the [[capital city|capital]] of [[France]].{{cite web|url=x}}"
            "<ref>Some ref</ref> See [http://x.org the site].[[Category:Cities]]"
            "{{Infobox {{nested|a}} b}}[[File:Paris.jpg|thumb|A [[view]]]] &amp;nbsp;")
    assert tokenize(clean_wiki(text)) == ["paris", "is", "the", "capital", "of", "france",
                                          "see", "the", "site"]


def test_analogy_scores():
    # planted: word i = (country, capital) pairs in orthogonal directions
    e = np.eye(6)
    emb = np.array([e[0], e[0] + e[4], e[1], e[1] + e[4], e[2], e[2] + e[4] + 0.01 * e[5]])
    gram = emb @ emb.T
    q = np.array([[0, 1, 2, 3], [2, 3, 4, 5], [0, 1, 4, 5]])
    assert np.array_equal(analogy_scores(gram, q), [1.0, 1.0, 1.0])
    assert analogy_scores(gram, np.array([[0, 1, 2, 4]]))[0] == 0.0
    # embeddings with no information tie every candidate: chance, exactly
    V = 9
    s = analogy_scores(np.eye(V) * 2.0, np.array([[0, 1, 2, 3], [4, 5, 6, 7]]))
    assert np.allclose(s, 1.0 / (V - 3))


def test_questions_file(tmp_path):
    p = tmp_path / "q.txt"
    p.write_text(": capital\nAthens Greece Baghdad Iraq\nParis France Rome Italy\n: family\n"
                 "boy girl brother sister\n")
    qs = Questions.load(p)
    assert len(qs) == 3 and [s for s, _ in qs.sections] == ["capital", "family"]
    idx, where = qs.covered(["athens", "greece", "baghdad", "iraq", "boy", "girl", "brother"])
    assert idx.tolist() == [[0, 1, 2, 3]] and where == ("capital",)
    p.write_text("Athens Greece Baghdad Iraq\n")
    with pytest.raises(tp.SpecError, match="line 1"):
        Questions.load(p)


def test_bad_inputs_are_named(small):
    vocab, stream = small
    with pytest.raises(tp.SpecError, match="one-hidden-layer"):
        cbow_network(tp.mup(2), 12)
    with pytest.raises(tp.SpecError, match="cbow_network"):
        train_cbow(tp.MLP(tp.mup(1), d_in=12, d_out=12, phi="id"), stream, 0.1)
    with pytest.raises(tp.SpecError, match="d_in"):
        train_cbow(cbow_network(tp.mup(1), 13), stream, 0.1)
    with pytest.raises(tp.SpecError, match="limit"):
        train_cbow(cbow_network(tp.mup(1), 12), stream, 0.1, limit="ntk")
    with pytest.raises(tp.SpecError, match="sample"):
        CBOWStream.of(vocab, zipf_corpus(), sample=-1)


def test_divergence_names_step_and_layer(small):
    vocab, stream = small
    run = train_cbow(cbow_network(tp.mup(1), 12), stream, 1e6, 32)
    d = run.status.divergence
    assert d is not None and d.step >= 1 and len(run.loss) == d.step
    assert np.isfinite(run.loss).all()


def test_finite_networks_converge_to_the_limit():
    """Outputs f(e_i) after training: rms distance to the exact limit (same stream) falls
    like n^(−1/2); the final loss's seed mean is within 3 SE of the limit's (paired by
    stream seed, seeds − 1 dof)."""
    from scipy import stats
    toks = zipf_corpus(V=40, n=6000, seed=7)
    vocab = Vocabulary.build(toks, 40)
    net = cbow_network(tp.mup(1), 40)
    eye = np.eye(40)
    widths, seeds = (128, 512, 2048), 8
    gaps = {w: [] for w in widths}
    diff = []
    for s in range(seeds):
        stream = CBOWStream.of(vocab, toks, window=3, negatives=4, batch_size=64, sample=0,
                               seed=s)
        lim = train_cbow(net, stream, 2.0, math.inf)
        for w in widths:
            r = train_cbow(net, stream, 2.0, w, seed=s)
            gaps[w].append(np.sqrt(np.mean((r.output(eye) - lim.output(eye)) ** 2)))
        diff.append(r.loss[-20:].mean() - lim.loss[-20:].mean())
    rms = [np.sqrt(np.mean(np.square(gaps[w]))) for w in widths]
    fit = stats.linregress(np.log(widths), np.log(rms))
    assert -0.65 <= fit.slope <= -0.35, (fit.slope, rms)
    d = np.array(diff)
    assert abs(d.mean()) <= 3 * d.std(ddof=1) / np.sqrt(seeds)


def test_real_data_pipeline_ci_sized():
    """The study's pipeline on gensim's excerpt at V = 1000, one epoch: the μ-limit answers
    questions that the fixed embeddings of the kernel limits answer at chance."""
    try:
        tokens = tp.datasets.wiki_excerpt()
    except tp.BackendUnavailableError as exc:       # gensim's data: pip install -e ".[text]"
        pytest.skip(str(exc))
    assert 4e5 < len(tokens) < 5e5 and tokens[:3] == ["anarchism", "is", "a"]
    questions = tp.datasets.analogy_questions()
    assert len(questions) == 19544 and len(questions.sections) == 14
    vocab = Vocabulary.build(tokens, 1000)
    q, _ = questions.covered(vocab.words)
    assert len(q) > 50
    stream = CBOWStream.of(vocab, tokens, window=5, negatives=5, batch_size=256, sample=1e-3,
                           seed=0)
    net = cbow_network(tp.mup(1), 1000)
    T = stream.steps
    run = train_cbow(net, stream, lambda t: 32.0 * (1 - t / T), math.inf)
    assert run.status.complete and run.loss[-50:].mean() < run.loss[:50].mean()
    chance = analogy_scores(np.eye(1000), q)
    assert np.allclose(chance, 1 / 997)
    assert run.analogy(q).mean() > 5 * chance.mean()


def test_torch_loss_matches():
    torch = pytest.importorskip("torch")
    from tp_limits.interop.torch_model import _loss
    rng = np.random.default_rng(3)
    f = rng.normal(size=(5, 7)) * 2
    y = rng.integers(-2, 2, size=(5, 7)).astype(float)
    ft = torch.tensor(f, requires_grad=True, dtype=torch.float64)
    value = _loss(torch, "sgns")(ft, torch.tensor(y))
    value.backward()
    loss = get_loss("sgns")
    assert value.item() == pytest.approx(loss.value(f, y, np).mean(), rel=1e-13)
    assert np.allclose(ft.grad.numpy(), loss.grad(f, y, np) / 5, atol=1e-14)


@pytest.mark.parametrize("width", [16, math.inf])
def test_kernel_equals_its_numpy_twin(small, width):
    from tp_limits.tasks.pair import initial, rates
    from tp_limits.tasks.word2vec import cbow_step, cbow_step_numpy
    vocab, stream = small
    net = cbow_network(tp.mup(1), len(vocab))
    E_in, E_out, _ = initial(net, width, seed=2)
    lr_in, lr_out, alpha = rates(net, width, 0.5)
    twin = E_in.copy(), E_out.copy()
    for t, batch in enumerate(stream.batches()):
        a = cbow_step(E_in, E_out, batch, lr_in, lr_out, alpha, t)
        b = cbow_step_numpy(*twin, batch, lr_in, lr_out, alpha, t)
        assert a == pytest.approx(b, rel=1e-13)
    assert np.abs(E_in - twin[0]).max() <= 1e-13 * np.abs(twin[0]).max()
    assert np.abs(E_out - twin[1]).max() <= 1e-13 * np.abs(twin[1]).max()
    assert np.abs(E_out).max() > 0.1                      # the outputs moved


def test_ctrl_c_keeps_the_finished_steps(small, monkeypatch):
    """A KeyboardInterrupt during step 3 ends the run with 3 steps and says so."""
    from tp_limits.tasks import word2vec
    vocab, stream = small
    interrupt_on_call(monkeypatch, word2vec, "cbow_step", 4)
    run = train_cbow(cbow_network(tp.mup(1), 12), stream, 0.5, math.inf)
    assert run.status.interrupted and run.status.completed_steps == 3
    assert len(run.loss) == 3 and np.isfinite(run.loss).all()
