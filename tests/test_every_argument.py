"""The whole class, not the cases: every number-valued argument of the public API, and
every number-valued key of an experiment file, refuses a wrong type, NaN and infinity
with a TPError that names the argument (or the file's key) — found by reading the
signatures and the schema, so an argument added later is covered without a new line
here.  The hand-written cases of test_bad_inputs.py check the messages in detail.
"""
import inspect
import math

import numpy as np
import pytest
from conftest import d1

import tp_limits as tp
from tp_limits.errors import TPError
from tp_limits.experiment import build
from tp_limits.engine.options import FINITE_OPTIONS, option_default
from tp_limits.experiment.schema import SCHEMA

NET2 = tp.MLP(tp.mup(2), 2, 1)
SMALL = {"parametrization": {"preset": "mup", "L": 2}, "data": {"generator": "d1"},
         "routine": {"lr": 0.5, "steps": 3}, "limit": {"particles": 2_000, "replicates": 2},
         "finite": {"widths": [32, 64], "seeds": 2, "parallel": False}}

#: each public callable with the arguments of a small valid call; the numbers probed are
#: its parameters with a number as default, and ``more`` (required numbers)
TARGETS = {
    "ABC": (tp.ABC, ([0, 0], [0, 0]), {}, ()),
    "mup": (tp.mup, (), {}, ()),
    "ntp": (tp.ntp, (), {}, ()),
    "sp": (tp.sp, (), {}, ()),
    "MLP": (tp.MLP, (tp.mup(2),), {"d_in": 2}, ("d_in",)),
    "Residual": (tp.Residual, (), {}, ()),
    "Bias": (tp.Bias, (), {}, ()),
    "Routine": (tp.Routine, (), {"X": np.eye(2), "Y": np.ones((2, 1)), "lr": 0.1}, ("lr",)),
    "SGD": (tp.SGD, (), {}, ()),
    "Adam": (tp.Adam, (), {}, ()),
    "Muon": (tp.Muon, (), {}, ()),
    "SpectralUpdate": (tp.SpectralUpdate, (), {"transform": "svc", "clip": 4.0}, ("clip",)),
    "train_finite": (tp.train_finite, (NET2, d1()), {"width": 16}, ("width",)),
    "simulate_limit": (tp.simulate_limit, (NET2, d1()), {}, ()),
    "empirical_ntk": (tp.empirical_ntk, (NET2, np.eye(2)), {}, ()),
    "initial_outputs": (tp.initial_outputs, (NET2, d1()), {"width": 16}, ("width",)),
    "from_mup": (tp.from_mup, (), {"d_in": 2, "width": 64, "d_out": 1},
                 ("d_in", "width", "d_out")),
    "coord_check": (tp.coord_check, (NET2, d1()), {"widths": [16, 32]}, ()),
    "convergence": (tp.convergence, (NET2, d1()), {"widths": [16, 32]}, ()),
    "dichotomy": (tp.dichotomy, (d1(),), {"d_in": 2}, ("d_in",)),
    "lr_sweep": (tp.lr_sweep, (NET2, d1()), {"lrs": [0.1, 0.2, 0.4]}, ()),
    "Transformer": (tp.transformer.Transformer, (), {"vocab": 16, "seq_len": 8},
                    ("vocab", "seq_len")),
    "train_transformer": (tp.transformer.train_transformer,
                          (tp.transformer.Transformer(16, 8), tp.transformer.markov_task()),
                          {"width": 16, "lr": 0.1, "steps": 1}, ("width", "lr")),
    "simulate_transformer_limit": (tp.transformer.simulate_transformer_limit,
                                   (tp.transformer.Transformer(16, 8),
                                    tp.transformer.markov_task()),
                                   {"lr": 0.1, "steps": 1, "particles": 64}, ("lr",)),
    "markov_task": (tp.transformer.markov_task, (), {}, ()),
    "transformer_lr_sweep": (tp.transformer.transformer_lr_sweep,
                             (tp.transformer.Transformer(16, 8), tp.transformer.markov_task()),
                             {"widths": [16], "lrs": [0.1, 0.2, 0.4], "steps": 1, "seeds": 2,
                              "progress": False}, ()),
    "attention_coord_check": (tp.transformer.attention_coord_check,
                              (tp.transformer.Transformer(16, 8), tp.transformer.markov_task()),
                              {"widths": [16, 32], "lr": 0.1, "steps": 1, "seeds": 2}, ("lr",)),
    "transformer_kernel_descent": (tp.transformer.transformer_kernel_descent,
                                   (tp.transformer.Transformer(16, 8, param="ntk"),
                                    tp.transformer.markov_task()), {"lr": 0.1, "steps": 1},
                                   ("lr",)),
    "transformer_initial_outputs": (tp.transformer.transformer_initial_outputs,
                                    (tp.transformer.Transformer(16, 8),
                                     tp.transformer.markov_task()), {"width": 16},
                                    ("width",)),
    "empirical_transformer_ntk": (tp.transformer.empirical_transformer_ntk,
                                  (tp.transformer.Transformer(4, 2), np.zeros((1, 2), int)),
                                  {"width": 16}, ("width",)),
    "transformer_to_torch": (tp.interop.transformer_to_torch, (tp.transformer.Transformer(4, 2),),
                             {"width": 16, "lr": 0.1}, ("width", "lr")),
    "depth_check": (tp.depth_check,
                    (tp.MLP(tp.mup(3), 2, 1, residual=tp.Residual.depth_mup("sgd")), d1()),
                    {"depths": [2, 4, 8]}, ()),
}
BAD = {"a number as a string": "2", "a word": "two", "NaN": math.nan, "infinity": math.inf}
#: exponents are numbers or strings like "-1/2" (exact rationals) or "c + 1/2" (names are
#: free symbols of a symbolic parametrization): no string is wrong by its type there
EXPONENTS = {("ABC", "c"), ("ntp", "c"), ("sp", "c")}


def _probes():
    out = []
    for name, (fn, args, kwargs, more) in TARGETS.items():
        params = inspect.signature(fn).parameters
        numbers = [p for p, spec in params.items()
                   if isinstance(spec.default, (int, float)) and not isinstance(spec.default, bool)]
        for p in dict.fromkeys(numbers + list(more)):
            for label in BAD:
                if (name, p) in EXPONENTS and label in ("a number as a string", "a word"):
                    continue
                out.append(pytest.param(name, p, label, id=f"{name}-{p}-{label}"))
    return out


@pytest.mark.parametrize("name, param, label", _probes())
def test_every_number_argument_refuses_a_wrong_value_by_name(name, param, label):
    fn, args, kwargs, _ = TARGETS[name]
    bad = BAD[label]
    with pytest.raises(TPError) as err:
        fn(*args, **{**kwargs, param: bad})
    assert param in str(err.value), (param, str(err.value))


def test_the_probes_cover_the_number_arguments():
    """The harness reads the signatures: at least 45 arguments of 20 callables."""
    probes = {(n, p) for n, p, _ in (x.values for x in _probes())}
    assert len(probes) >= 45 and len({n for n, _ in probes}) >= 20


def _toml_number_keys():
    keys = []
    for section, table in SCHEMA.items():
        for key, spec in table.items():
            if spec.kind in ("int", "number", "number|numbers"):
                keys.append((section, key))
    return keys


@pytest.mark.parametrize("section, key", _toml_number_keys(),
                         ids=[f"{s}.{k}" for s, k in _toml_number_keys()])
@pytest.mark.parametrize("label", list(BAD))
def test_every_number_key_of_a_file_refuses_a_wrong_value_by_its_key(section, key, label):
    import copy
    cfg = copy.deepcopy(SMALL)
    cfg.setdefault(section, {})[key] = BAD[label]
    with pytest.raises(TPError) as err:
        build(cfg)
    assert f"{section}.{key}" in str(err.value), str(err.value)


RES2 = tp.MLP(tp.mup(2), 2, 1, residual=tp.Residual())
#: every study that passes ``train_finite`` options on to its runs, as a small call
STUDIES = {
    "convergence": lambda kw: tp.convergence(NET2, d1(), [8, 16], seeds=2, particles=200,
                                             executor="serial", **kw),
    "coord_check": lambda kw: tp.coord_check(NET2, d1(), [8, 16], seeds=2, executor="serial",
                                             **kw),
    "lr_sweep": lambda kw: tp.lr_sweep(NET2, d1(), [0.1, 0.2, 0.4], [8, 16], seeds=2,
                                       limit=False, refine=0, executor="serial",
                                       progress=False, **kw),
    "depth_check": lambda kw: tp.depth_check(RES2, d1(), [2, 3], width=16, seeds=2,
                                             executor="serial", **kw),
}


@pytest.mark.parametrize("option", [o.name for o in FINITE_OPTIONS if o.name != "progress"])
@pytest.mark.parametrize("study", STUDIES)
def test_every_run_option_reaches_every_study_or_is_refused_by_name(study, option):
    """Each train_finite option given to a study (at its default value) is passed on to
    the runs, or refused before any work with a TPError that names it and says why —
    never a TypeError from inside a worker ("multiple values for keyword argument")."""
    value = option_default(FINITE_OPTIONS, option)
    try:
        STUDIES[study]({option: value})
    except TPError as exc:
        assert option in str(exc) and "itself" in str(exc)
