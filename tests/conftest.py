"""Shared test data and helpers.

The routines are the standard problems of docs/theory.md §9 (data D1, N2,
N8); tests import them with ``from conftest import ...``.  Monte Carlo
comparisons take their tolerance from the estimator's standard error and
its degrees of freedom (:func:`within_se`).
"""
import matplotlib
import numpy as np

matplotlib.use("Agg")

# D1: d = 2, d_out = 1, B = 1, three steps; eval inputs (1, 0), (0.6, 0.8), (1, 1)
D1 = dict(X=np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 0.0]]), Y=np.array([[1.0], [-1.0], [1.0]]),
          eval_inputs=np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 1.0]]))
# N2: d = 3, d_out = 2, B = 2, two steps
N2 = dict(X=np.array([[1, 0, 0], [0, 1, 0], [0.5, 0.5, 0.5], [1, -1, 0]], float),
          Y=np.array([[1, 0], [0, -1], [0.5, 0.5], [1, 0]], float),
          eval_inputs=np.array([[0, 0, 1], [1, 1, 1]], float), batch_size=2)
# N8: the N2 batches with eval inputs (1, 1, 1), (0, 0, 1); N8_LONG adds a third step
N8 = dict(X=N2["X"], Y=N2["Y"], eval_inputs=np.array([[1, 1, 1], [0, 0, 1]], float),
          batch_size=2)
N8_LONG = dict(X=np.vstack([N2["X"], [[0, 0, 1], [1, 1, 0]]]),
               Y=np.vstack([N2["Y"], [[0, 1], [-0.5, 0.5]]]),
               eval_inputs=N8["eval_inputs"], batch_size=2)


def d1(lr=0.5, **kw):
    import tp_limits as tp
    return tp.Routine(lr=lr, **D1, **kw)


def t_quantile(dof, level=0.99999943):
    """Two-sided Student-t quantile; the default level is that of ±5σ for a Gaussian."""
    from scipy.stats import norm, t
    if dof is None or not np.isfinite(dof):
        return float(norm.ppf(0.5 + level / 2))
    return float(t.ppf(0.5 + level / 2, dof))


def within_se(value, reference, se, dof=None, level=0.99999943, skip_zero=False):
    """Assert |value − reference| <= q·se entrywise, q the two-sided t quantile for ``dof``.

    Returns the largest |z| for reporting.  Entries with se = 0 must agree
    exactly unless ``skip_zero``.
    """
    value, reference, se = map(np.asarray, (value, reference, se))
    q = t_quantile(dof, level)
    dev = np.abs(value - reference)
    if skip_zero:
        keep = se > 0
        dev, se = dev[keep], se[keep]
    assert np.all(dev <= q * se), (np.max(dev / np.where(se > 0, se, np.inf)), q)
    return float(np.max(dev / np.where(se > 0, se, np.inf))) if dev.size else 0.0
