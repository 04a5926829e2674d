"""Options both engines share, the memory guard, and run metadata."""
import numpy as np
import pytest
from conftest import d1

import tp_limits as tp
from tp_limits.engine.memory import require_memory, require_particles, usable_bytes
from tp_limits.engine.meta import PROBLEM_KEYS, problem_mismatch
from tp_limits.engine.options import check_dtype, check_record, check_seed, check_seeds
from tp_limits.spec import Problem


@pytest.mark.parametrize("value, ok", [
    (np.float64, True), ("float32", True), (np.dtype("float64"), True),
    (np.float16, False), ("int64", False), (True, False), ("double precision", False)])
def test_dtype(value, ok):
    if ok:
        assert check_dtype(value).name in ("float32", "float64")
    else:
        with pytest.raises(tp.SpecError, match="dtype"):
            check_dtype(value)


@pytest.mark.parametrize("record", [None, "stats", ("stats", "bogus"), 3])
def test_record_must_be_a_tuple_of_known_options(record):
    with pytest.raises(tp.SpecError, match="record"):
        check_record(record, ("stats", "spectral"))


def test_seeds():
    assert check_seed(0) == 0 and check_seeds(3) == (0, 1, 2) and check_seeds([5, 7]) == (5, 7)
    for bad in (-1, 1.0, "0", True, 2 ** 64):
        with pytest.raises(tp.SpecError, match="seed"):
            check_seed(bad)
    with pytest.raises(tp.SpecError, match="distinct"):
        check_seeds([1, 1])


def test_memory_guard_names_the_largest_count():
    with pytest.raises(tp.MemoryBudgetError, match="at most"):
        require_particles(10 ** 15, 8.0, "test arrays")
    require_memory(1024.0, "a small array")
    assert usable_bytes() > 0


@pytest.mark.parametrize("net, sampler, replicates", [
    (tp.MLP(tp.mup(1), 2, 1, phi="tanh"), "qmc", 8),            # one hidden layer, Sobol'
    (tp.MLP(tp.mup(1), 2, 1, phi="tanh"), "antithetic", 1),
    (tp.MLP(tp.mup(2), 2, 1, phi="tanh"), "qmc", 8),            # deep
])
def test_the_advised_particle_count_is_not_refused_again(monkeypatch, net, sampler,
                                                          replicates):
    """'at most N particles fit' names a count the sampler runs as given (a power of two
    for Sobol' points, an even one for pairs): given back, it passes the same guard."""
    import re

    from tp_limits.engine import memory
    from tp_limits.limit.simulate import prepare_limit
    kw = dict(sampler=sampler, replicates=replicates)
    monkeypatch.setattr(memory, "USABLE", memory.USABLE * 3e-4)   # a few MB usable
    with pytest.raises(tp.MemoryBudgetError, match="particles fit") as err:
        prepare_limit(net, d1(), particles=10 ** 6, **kw)
    advised = int(re.search(r"at most ([\d,]+) particles fit", str(err.value))[1].replace(",", ""))
    assert advised > 0
    plan = prepare_limit(net, d1(), particles=advised, **kw)
    assert plan.engine.particles == advised


@pytest.mark.parametrize("L, optimizer", [(1, "sgd"), (2, "sgd"), (2, "adam")])
def test_a_run_beyond_its_time_budget_is_told_a_particle_count_that_fits(L, optimizer):
    """The time refusal names the largest particle count (as the sampler runs it) whose
    estimate fits the budget, and that count, given back, is accepted."""
    import re

    from tp_limits.limit.simulate import prepare_limit
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 3))
    r = tp.Routine(X, np.tanh(X[:, :1]), lr=0.01, batch_size=4,
                   optimizer=tp.Adam() if optimizer == "adam" else None)
    net = tp.MLP(tp.mup(L, optimizer=optimizer), 3, 1)
    with pytest.raises(tp.SpecError, match="beyond time_budget") as err:
        prepare_limit(net, r, particles=2 ** 16, time_budget=30)
    k = int(re.search(r"particles=([\d,]+) fits", str(err.value))[1].replace(",", ""))
    plan = prepare_limit(net, r, particles=k, time_budget=30)
    assert plan.engine.particles == k and 0 < plan.engine.info["time_estimate_s"] <= 30
    assert k & (k - 1) == 0                  # a power of two: Sobol' points with replicates


def test_finite_and_limit_meta_describe_the_same_problem():
    net, r = tp.MLP(tp.mup(1), 2, 1), d1()
    fin = tp.train_finite(net, r, width=32, record=())
    lim = tp.simulate_limit(net, r, particles=2_000)
    assert all(fin.meta[k] == lim.meta[k] for k in PROBLEM_KEYS)
    assert problem_mismatch(Problem(net, r), lim.meta) == []
    assert problem_mismatch(Problem(net, d1(lr=0.1)), lim.meta) == ["lr = 0.5 (here 0.1)"]


def test_a_slow_first_call_says_it_is_compiling(capsys):
    import time

    from tp_limits.engine.progress import compile_notice
    with compile_notice("a test kernel", after=0.05):
        time.sleep(0.3)
    err = capsys.readouterr().err
    assert "compiling a test kernel (first use" in err and "compiled a test kernel in" in err
    with compile_notice("a cached kernel", after=0.5):
        pass
    assert capsys.readouterr().err == ""


def test_only_the_nonlinearity_in_use_is_compiled():
    """The sweep's φ is part of its compiled type: a tanh run loads or compiles tanh only
    (all seven were compiled before: 140 s on a 2-core machine, 21 s now for one)."""
    import subprocess
    import sys
    code = ("import tp_limits as tp\n"
            "from tp_limits.limit.fused.sweep import sweep_kernel\n"
            "r = tp.Routine([[1.0, 0.0]], [[1.0]], lr=0.1)\n"
            "tp.simulate_limit(tp.MLP(tp.mup(1), 2, 1, phi='tanh'), r, particles=64,"
            " replicates=1)\n"
            "print(sorted({sig[1].count for sig in sweep_kernel.signatures}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, check=True).stdout
    assert out.strip().splitlines()[-1] == "[2]"        # tanh's tag: two entries


# ---- the one option table --------------------------------------------------------------
def test_entry_points_take_exactly_their_declared_options_with_the_declared_defaults():
    """simulate_limit's named parameters and train_finite's are the options of the one
    table (engine/options.py), with its defaults; the rest of simulate_limit's options
    are the knobs, taken as keywords or in tp.Knobs."""
    import inspect

    from tp_limits.engine.options import FINITE_OPTIONS, LIMIT_OPTIONS
    for fn, table, skip in ((tp.simulate_limit, LIMIT_OPTIONS, ("net", "routine", "knobs")),
                            (tp.train_finite, FINITE_OPTIONS, ("net", "routine", "width"))):
        params = {k: v for k, v in inspect.signature(fn).parameters.items()
                  if k not in skip and v.kind != inspect.Parameter.VAR_KEYWORD}
        named = [o for o in table if not o.knob]
        assert list(params) == [o.name for o in named], fn.__name__
        for o in named:
            default = params[o.name].default
            assert np.dtype(default) == o.default if o.name == "dtype" else \
                default == o.default, (fn.__name__, o.name)


def test_no_public_function_takes_more_than_twelve_parameters():
    import ast
    from pathlib import Path
    over = []
    for path in (Path(tp.__file__).parent).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                a = node.args
                n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                n -= bool(a.args) and a.args[0].arg in ("self", "cls")
                if n > 12:
                    over.append(f"{path.name}:{node.name} ({n})")
    assert not over, over


def test_knobs_are_checked_when_made_and_given_once():
    from tp_limits.errors import SpecError
    from tp_limits.limit.simulate import prepare_limit
    with pytest.raises(SpecError, match="zdot = 'adjoint'"):
        tp.Knobs(zdot="adjoint")
    with pytest.raises(SpecError, match="unknown option.*'particle'.*tp.Knobs"):
        tp.Knobs(particle=10)
    with pytest.raises(SpecError, match="particles"):        # a named option is not a knob
        tp.Knobs(particles=10)
    net, r = tp.MLP(tp.mup(2), 2, 1), tp.Routine([[1.0, 0.0]], [[1.0]], lr=0.1)
    plan = prepare_limit(net, r, tp.Knobs(zdot="tangent", sampler="mc"), replicates=1)
    assert plan.options.zdot == "tangent" and plan.options.sampler == "mc"
    with pytest.raises(SpecError, match="both in knobs= and as keywords"):
        tp.simulate_limit(net, r, knobs=tp.Knobs(zdot="tangent"), zdot="stein")
    with pytest.raises(SpecError, match="unknown option.*'zdott'.*simulate_limit"):
        tp.simulate_limit(net, r, zdott="stein")
