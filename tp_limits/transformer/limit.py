"""The infinite-width limit of a μP transformer trained by SGD, by Monte Carlo over
particles, or exactly for φ = id (docs/theory.md §17.4).

Every width-n vector of the network becomes its Z-variable, a row of N particles, one row
per (sequence, position); every average over the width becomes an expectation, a mean
over the particles.  What that makes of each layer kind:

* **embeddings** — a particle carries its coordinate of every word's and every position's
  embedding, Z^E ∈ ℝ^V and Z^P ∈ ℝ^S, moved by SGD as an input layer's are:
  Z^E_w −= η Σ_{(b,s): ξ_{b,s}=w} Z^{nδh_{b,s}};
* **hidden matrices** W_Q, W_K, W_V, W_O, W_U, W_D — each the deep engine's matrix
  (:class:`~.particles.LimitMatrix`; exactly, :class:`~.coefficients.ExactMatrix`): the product with a new vector is a fresh Gaussian hat conditional
  on every product the matrix has met, plus Stein's Ż, plus the SGD sum over its stored
  pairs −η Σ_j Z^{g_j} E[Z^{x_j} Z^x];
* **LayerNorm** — the particle mean and variance (docs/theory.md §14.3);
* **attention** with 1/d logits — deterministic: ℓ_{ss'} = c E[Z^{q_s} Z^{k_{s'}}], the
  softmax an S × S matrix per sequence, o_s = Σ_{s'} p_{ss'} Z^{v_{s'}} a linear combination
  of rows; backward ∂ℓ from dp_{ss'} = E[Z^{nδo_s} Z^{v_{s'}}], and
  Z^{nδq_s} = c Σ_{s'} ∂ℓ_{ss'} Z^{k_{s'}}.  H heads of width n/H all have the same logits
  in the limit (their coordinates are exchangeable), so the limit is that of one head;
* **readout** — ω = n W_out is a particle coordinate Z^ω ∈ ℝ^V, f = E[Z^ω Z^a] (0 at
  initialization), Z^{nδa} = χ Z^ω, Z^ω −= η Σ Z^{a} χ.

The walk below is written once against a *space* — :class:`~.particles.ParticleSpace`
(rows of N particles, expectations as particle means) or
:class:`~.coefficients.CoefficientSpace` (coefficient vectors over Gaussian primitives,
expectations exact) — so the exact engine is the Monte Carlo engine's twin.  Standard
errors come from independent replicates (replicates − 1 degrees of freedom).
"""
from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from ..engine.backend import numpy_backend
from ..engine.memory import require_memory
from ..engine.options import check_seed
from ..engine.progress import progress_bar
from ..engine.status import Divergence, RunStatus
from ..engine.trajectory import Trajectory
from ..errors import DivergenceError, UnsupportedError
from ..limit.sampling import Draws
from ..nonlinearities import get_nonlinearity
from ..spec.checks import check_choice, check_int, finite_positive
from .coefficients import CoefficientSpace
from .model import BLOCKS, Transformer
from .network import attention_weights, layer_norm, layer_norm_backward, logits_gradient
from .parametrization import learning_rate
from .particles import ParticleSpace
from .tasks import TokenTask
from .train import check_optimizer, loss_and_gradient, scored, scored_rows

_B = numpy_backend()
#: the engines: Monte Carlo over particles, or exact over coefficient vectors (φ = id)
METHODS = ("montecarlo", "exact")


def limit_refusal(model: Transformer, optimizer) -> str | None:
    """Why the limit of ``model`` trained by ``optimizer`` is not simulated (None: it is)."""
    if model.param == "ntk":
        return ("param = 'ntk' is the kernel regime: in the limit the features stay where "
                "they start and f moves by kernel gradient descent; use "
                "transformer_kernel_descent (docs/theory.md §17.6)")
    if model.param != "mup":
        return (f"param = {model.param!r}: standard practice has no stable feature-learning "
                "limit at a width-free rate; the limit is simulated for param = 'mup'")
    if model.attention == "1/sqrt(d)":
        return ("attention = '1/sqrt(d)': the logits blow up like n^(1/2) after the first "
                "step (classify_attention), so there is no limit to simulate; use '1/d'")
    if check_optimizer(optimizer, model) != "sgd":
        return ("Adam: its per-entry normalization of an n × n matrix's gradient is not a "
                "sum over stored pairs (it needs partner particles for every matrix), and its "
                "first step on W_Q, W_K normalizes gradients of size n^(-3/2), which a "
                "width-free eps makes vanish in the limit but not at practical widths "
                "— and at practical eps the step's direction is a central-limit "
                "fluctuation, so the logits stay random as n grows (docs/theory.md §17.4); "
                "the transformer limit runs SGD")
    return None


class TransformerLimit:
    """One replicate's state in a space: embeddings Z^E (·, V) and Z^P (·, S), the readout
    Z^ω (·, V), and a matrix of the space per hidden matrix."""

    def __init__(self, model: Transformer, task: TokenTask, lr: float, space):
        self.model, self.task, self.eta, self.space = model, task, lr, space
        self.phi = get_nonlinearity(model.phi)
        sig = model.sigma
        self.ZE = space.gaussian(sig, model.vocab)
        self.ZP = space.gaussian(sig, model.seq_len) if model.positions else None
        self.Zw_own = None if model.tied else space.gaussian(model.sigma_out, model.vocab)
        self.W = {}
        for name, kind in model.parameter_kinds().items():
            if kind == "hidden":
                zero = model.zero_query and name.startswith("Q")
                self.W[name] = space.matrix(name, 0.0 if zero else sig,
                                            learning_rate(model, "sgd", kind, lr, None))

    @property
    def Zw(self):
        """The readout's coordinates Z^ω = n W_outᵀ: its own, or σ_out Z^E when tied."""
        return self.model.sigma_out * self.ZE if self.model.tied else self.Zw_own

    # -- the forward pass on rows ---------------------------------------------------------
    def forward(self, tokens, stored: int, t: int):
        """(f (m, V), caches) for the sequences ``tokens``; the first ``stored`` rows
        (training positions) join the families."""
        m, sp = self.model, self.space
        for W in self.W.values():
            W.t = t
        B, S = tokens.shape
        h = self.ZE.T[tokens.ravel()]
        if self.ZP is not None:
            h = h + np.tile(self.ZP.T[:S], (B, 1))
        caches = []
        for k in range(1, m.blocks + 1):
            c = {}
            if m.attention != "none":
                a, s = layer_norm(h, m.norm_eps, sp)
                q, kk, v = (self.W[f"{x}{k}"].forward(a, stored).reshape(B, S, -1)
                            for x in "QKV")
                logits = m.attn_mult * sp.moments(q, kk)
                self._check(logits, t, k, "attention logits")
                p = attention_weights(logits, m.causal)
                o = (p @ v).reshape(B * S, -1)
                h = h + m.branch_multiplier * self.W[f"O{k}"].forward(o, stored)
                c.update(a=a, s=s, q=q, k=kk, v=v, p=p)
            if m.mlp:
                a2, s2 = layer_norm(h, m.norm_eps, sp)
                u = self.W[f"U{k}"].forward(a2, stored)
                h = h + m.branch_multiplier * self.W[f"D{k}"].forward(self.phi.phi(u, _B), stored)
                c.update(a2=a2, s2=s2, u=u)
            self._check(h, t, k, "residual stream")
            caches.append(c)
        aF, sF = layer_norm(h, m.norm_eps, sp)
        f = sp.moments(aF, self.Zw.T)
        self._check(f, t, None, "output f")
        return f.reshape(B, S, -1), (caches, aF, sF)

    @staticmethod
    def _check(x, t, layer, quantity):
        size = float(np.max(np.abs(x))) if x.size else 0.0
        if not np.isfinite(size):
            raise DivergenceError(t, layer, quantity, BLOCKS, size=size)

    # -- the backward pass and the update -------------------------------------------------
    def step(self, f, caches, t: int) -> float:
        """Backward through the training rows, then the SGD update; returns the loss."""
        m, task, sp = self.model, self.task, self.space
        B, S = task.tokens.shape
        rows = B * S
        loss, df = loss_and_gradient(m, f[:B], task.targets)
        chi = df.reshape(rows, -1)
        blocks, aF, sF = caches
        aF = aF[:rows]
        dh = layer_norm_backward(aF, sF[:rows], chi @ self.Zw.T, sp)
        for k in range(m.blocks, 0, -1):
            c = blocks[k - 1]
            if m.mlp:
                dy = self.W[f"D{k}"].backward(m.branch_multiplier * dh)
                du = dy * self.phi.dphi(c["u"][:rows], _B)
                dh = dh + layer_norm_backward(c["a2"][:rows], c["s2"][:rows],
                                              self.W[f"U{k}"].backward(du), sp)
            if m.attention != "none":
                do = self.W[f"O{k}"].backward(m.branch_multiplier * dh).reshape(B, S, -1)
                p, v, q, kk = (c[x][:B] for x in ("p", "v", "q", "k"))
                dp = sp.moments(do, v)
                dl = logits_gradient(p, dp, m.attn_mult)
                da = (self.W[f"Q{k}"].backward((dl @ kk).reshape(rows, -1))
                      + self.W[f"K{k}"].backward((dl.transpose(0, 2, 1) @ q).reshape(rows, -1))
                      + self.W[f"V{k}"].backward((p.transpose(0, 2, 1) @ do).reshape(rows, -1)))
                dh = dh + layer_norm_backward(c["a"][:rows], c["s"][:rows], da, sp)
        for W in self.W.values():
            W.stepped(rows)
        readout_step = -self.eta * aF.T @ chi
        tok = task.tokens.ravel()
        np.add.at(self.ZE.T, tok, -self.eta * dh)
        if self.ZP is not None:
            self.ZP[:, :S] -= self.eta * dh.reshape(B, S, -1).sum(axis=0).T
        if m.tied:          # E is the readout too: ΔZ^E gains σ_out times ω's step
            self.ZE += m.sigma_out * readout_step
        else:
            self.Zw_own += readout_step
        return loss


def primitive_count(model: Transformer, task: TokenTask, steps: int) -> int:
    """The exact engine's Gaussian primitives: the embeddings' and the readout's (2V + S), and
    per hidden matrix a hat for every row it multiplies: each step's training and
    evaluation rows forward and training rows backward, and the last evaluation."""
    matrices = sum(k == "hidden" for k in model.parameter_kinds().values())
    train, evals = task.tokens.size, task.eval_tokens.size
    per = steps * (2 * train + evals) + evals
    return 2 * model.vocab + model.seq_len + matrices * per


def bytes_needed(model: Transformer, task: TokenTask, steps: int, N: int,
                 method: str) -> float:
    """Memory of one run: per particle, two families (vectors and hats) per hidden matrix of
    steps × (training positions) rows, and one forward pass's cached rows; the exact engine's
    primitive covariance P × P and its rows of length P."""
    rows = task.tokens.size + task.eval_tokens.size
    live = rows * (12 * max(model.blocks, 1) + 4) + 3 * model.vocab
    if method == "exact":
        P = primitive_count(model, task, steps)
        return 8.0 * P * (P + live)
    matrices = sum(k == "hidden" for k in model.parameter_kinds().values())
    return 8.0 * N * (4 * matrices * steps * task.tokens.size + live)


def simulate_transformer_limit(model: Transformer, task: TokenTask, lr: float,
                               optimizer=None, steps: int = 5, particles: int = 8192,
                               replicates: int = 4, seed: int = 0, method: str = "montecarlo",
                               on_divergence: str = "raise",
                               progress: bool = False) -> Trajectory:
    """The limit of :func:`~.train.train_transformer` at the same constants.

    ``method="montecarlo"``: ``replicates`` independent particle systems of ``particles``
    each; ``f_eval`` is their mean and ``f_eval_se`` its standard error (replicates − 1
    degrees of freedom); ``stats["loss_replicates"]`` (replicates, T) each one's loss.  ``method="exact"`` (φ = "id" only): the same walk on coefficient
    vectors over Gaussian primitives, no sampling and no standard error (docs/theory.md
    §17.4).  Refused with the reason where the limit is not simulated
    (:func:`limit_refusal`), and before any work where it would not fit in memory.  Ctrl-C
    keeps the finished replicates; a divergence raises, or with ``on_divergence='stop'``
    returns the steps every replicate finished (an output after a step is evaluated with
    the next step's forward pass, so the step before the divergence is dropped too)."""
    from ..spec.optimizers.sgd import SGD
    optimizer = SGD() if optimizer is None else optimizer
    why = limit_refusal(model, optimizer)
    if why:
        raise UnsupportedError(why)
    model.check_task(task)
    lr, steps = finite_positive(lr, "lr"), check_int(steps, "steps", 0)
    N, R = check_int(particles, "particles", 2), check_int(replicates, "replicates", 2)
    seed = check_seed(seed)
    check_choice(method, "method", METHODS)
    check_choice(on_divergence, "on_divergence", ("raise", "stop"))
    if method == "exact":
        if model.phi != "id":
            raise UnsupportedError(f"method = 'exact' needs phi = 'id' (the model has "
                                   f"{model.phi!r}): only then is every variable a linear "
                                   "combination of Gaussian primitives")
        R = 1
    require_memory(bytes_needed(model, task, steps, N, method),
                   f"a transformer's {method} limit over {steps} steps"
                   + (f" with {N:,} particles" if method == "montecarlo" else ""))
    runs, interrupted, divergence = [], False, None
    try:
        # BLAS on one thread: the families' products are a few dozen rows, where threads
        # cost more than they give (6× at N = 4096 on two cores)
        with threadpool_limits(limits=1, user_api="blas"), progress_bar(
                progress, R * steps, f"transformer limit ({method})", per_step=N) as on_step:
            for r in range(R):
                if method == "exact":
                    space = CoefficientSpace(primitive_count(model, task, steps))
                else:
                    space = ParticleSpace(N, Draws(_B, np.random.default_rng([seed, r])),
                                          max(steps * task.tokens.size, 1))
                run = _replicate(model, task, lr, steps, space, on_step)
                runs.append(run)
                if run[3] is not None:
                    if on_divergence == "raise":
                        raise run[3]
                    divergence = divergence or Divergence.of(run[3])
    except KeyboardInterrupt:
        interrupted = True
    if interrupted and len(runs) < min(R, 2):
        raise KeyboardInterrupt          # no standard error without two replicates
    T = min(len(r[1]) for r in runs)
    f_eval = np.stack([r[0][:T + 1] for r in runs])
    loss = np.stack([r[1][:T] for r in runs]).mean(axis=0)
    f_train = np.stack([r[2][:T] for r in runs]).mean(axis=0)
    se = f_eval.std(axis=0, ddof=1) / np.sqrt(len(runs)) if len(runs) > 1 else None
    status = RunStatus(T, interrupted=interrupted, divergence=divergence,
                       se_dof=len(runs) - 1 if len(runs) > 1 else None)
    f_train = f_train.reshape(T, scored_rows(model, task.tokens), model.vocab)
    return Trajectory(f_eval=f_eval.mean(axis=0), f_train=f_train,
                      loss=loss, f_eval_se=se, status=status,
                      stats={"loss_replicates": np.stack([r[1][:T] for r in runs])},
                      meta={"engine": f"transformer limit ({method})", "particles":
                            N if method == "montecarlo" else None,
                            "replicates": len(runs), "seed": seed, "lr": lr})


def _replicate(model, task, lr, steps, space, on_step):
    """(f_eval (T+1, E, V), loss (T,), f_train (T, B, V), the DivergenceError or None) of one
    run in ``space``; after a divergence, the T steps whose output after them was
    evaluated."""
    with np.errstate(over="ignore", invalid="ignore"):     # a divergence is reported
        run = TransformerLimit(model, task, lr, space)
        both = np.concatenate([task.tokens, task.eval_tokens])
        stored, B = task.tokens.size, len(task.tokens)
        f_eval, losses, f_train = [], [], []
        try:
            for t in range(1, steps + 1):
                f, caches = run.forward(both, stored, t)
                f_eval.append(scored(model, f[B:], task.eval_targets)[0])
                f_train.append(scored(model, f[:B], task.targets)[0])
                losses.append(run.step(f, caches, t))
                on_step(t)
            f, _ = run.forward(task.eval_tokens, 0, steps + 1)
            f_eval.append(scored(model, f, task.eval_targets)[0])
        except DivergenceError as error:
            T = max(len(f_eval) - 1, 0)
            return (np.asarray(f_eval[:T + 1]), np.asarray(losses[:T]),
                    np.asarray(f_train[:T]), error)
    return np.stack(f_eval), np.asarray(losses), np.asarray(f_train), None
