"""The CUDA source generated from the registries' scalar functions (engine/cuda_source.py).

Without a GPU the generated device functions are still checked: translated to C they
are compiled for the host (gcc, with a few definitions standing in for CUDA's) and
run against the NumPy forms — every nonlinearity's (φ, φ′) and every optimizer rule's
step; where nvcc is installed the whole kernel source of several configurations is
compiled for a GPU too.  The kernel's results on a device are tested against the
array twin in test_limit_gpu.py."""
import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from tp_limits.engine.backend import numpy_backend
from tp_limits.engine.cuda_source import FAST_TANH, TranslationError, device_function
from tp_limits.limit.fused.sweep_cuda import cuda_source
from tp_limits.nonlinearities import NONLINEARITIES, nonlinearity_code
from tp_limits.spec.optimizers.base import RULES, rule_code

HOST = """#include <math.h>
#include <string.h>
#define __device__
#define __forceinline__ static inline
static inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
"""

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc (host C)")


def _host_library(source: str, tmp_path):
    """Compile C source into a shared library (no fast-math: IEEE arithmetic, as NumPy)."""
    src, lib = tmp_path / "f.c", tmp_path / "f.so"
    src.write_text(HOST + FAST_TANH + source)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(src), "-lm"],
                   check=True, capture_output=True, timeout=120)
    return ctypes.CDLL(str(lib))


def _ptr(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


@needs_gcc
@pytest.mark.parametrize("phi", list(NONLINEARITIES))
def test_generated_phi_matches_the_array_forms(phi, tmp_path):
    nl = NONLINEARITIES[phi]
    wrapper = ("void run(const double* x, double* f, double* g, long n) {\n"
               "    for (long i = 0; i < n; ++i) phi_dphi(x[i], &f[i], &g[i]);\n}\n")
    lib = _host_library(device_function(nl.kernel, "phi_dphi") + wrapper, tmp_path)
    x = np.concatenate([np.linspace(-12, 12, 4001), [0.0, -0.0, 1e-300, 40.0, -40.0]])
    f, g = np.empty_like(x), np.empty_like(x)
    lib.run(_ptr(x), _ptr(f), _ptr(g), ctypes.c_long(x.size))
    b = numpy_backend()
    assert np.allclose(f, nl.phi(x, b), rtol=1e-13, atol=1e-15)
    assert np.allclose(g, nl.dphi(x, b), rtol=1e-13, atol=1e-15)


@needs_gcc
@pytest.mark.parametrize("name", [name for name, rule in RULES.items() if not rule.plain])
def test_generated_rule_step_matches_the_rule_on_arrays(name, tmp_path):
    """Three steps of the rule on random coordinates, state and (per step) gradients:
    the generated C and the rule applied to NumPy arrays agree to rounding."""
    rule = RULES[name]
    k = len(rule.slots)
    slots = "".join(f", double* s{s}" for s in range(k))
    loads = "".join(f", s{s}[i]" for s in range(k))
    outs = "".join(f", &s{s}[i]" for s in range(k))
    wrapper = (f"void run(long n, double* z, const double* g{slots}, const double* h) {{\n"
               f"    for (long i = 0; i < n; ++i) rule_step(z[i], g[i]{loads}, h, &z[i]{outs});\n"
               "}\n")
    lib = _host_library(device_function(rule.step, "rule_step", hyper=rule.hyper) + wrapper,
                        tmp_path)
    rng = np.random.default_rng(rule_code(rule))
    n = 1000
    z = rng.standard_normal(n)
    state = tuple(np.abs(rng.standard_normal(n)) for _ in range(k))
    zc, sc = z.copy(), [s.copy() for s in state]
    for t in range(1, 4):
        h = rule.Hyper(*np.abs(rng.uniform(0.05, 0.9, len(rule.hyper))))
        g = rng.standard_normal(n)
        hp = np.array(h, dtype=np.float64)
        lib.run(ctypes.c_long(n), _ptr(zc), _ptr(g), *[_ptr(s) for s in sc], _ptr(hp))
        z, state = rule.apply(z, g, state, h)
    assert np.allclose(zc, z, rtol=1e-14, atol=1e-15)
    for a, b in zip(sc, state):
        assert np.allclose(a, b, rtol=1e-14, atol=1e-15)


def test_untranslatable_functions_are_refused_by_name():
    def uses_a_loop(x):
        for _ in range(2):
            x = x + 1.0
        return x

    def unknown_call(x):
        return np.sinc(x)

    with pytest.raises(TranslationError, match="uses_a_loop.*For"):
        device_function(uses_a_loop, "f")
    with pytest.raises(TranslationError, match="'sinc'"):
        device_function(unknown_call, "f")


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None,
                                reason="needs nvcc (the CUDA compiler)")


def _compiles(source: str, tmp_path):
    src = tmp_path / "kernel.cu"
    src.write_text(source)
    run = subprocess.run(["nvcc", "--ptx", "-arch=sm_80", "-o", str(tmp_path / "kernel.ptx"),
                          str(src)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr


@needs_nvcc
@pytest.mark.parametrize("phi, rule, storage, stats, constant", [
    ("tanh", "sgd", "double", False, False), ("tanh", "sgd", "double", False, True),
    ("gelu", "heavy_ball", "double", True, True), ("softplus", "adam", "float", True, False)])
def test_whole_kernel_source_compiles_for_a_gpu(phi, rule, storage, stats, constant, tmp_path):
    _compiles(cuda_source(nonlinearity_code(phi), rule_code(RULES[rule]), storage,
                          3, 2, 2, 1, 3, stats, constant), tmp_path)


def test_launch_choice_is_the_measured_table():
    """sweep_cuda.launch_choice picks, for each (d, B) of docs/performance.md's
    one-hidden-layer GPU table, the variant the table says runs use, and that variant
    was the fastest measured there or within 5 % of it (the leases' spread)."""
    import pathlib
    import re

    from tp_limits.limit.fused.sweep_cuda import launch_choice
    doc = (pathlib.Path(__file__).parents[1] / "docs" / "performance.md").read_text()
    names = {"pointers": ("global", 1), "constant": ("constant", 1),
             "constant, 2 blocks": ("constant", 2)}
    rows = re.findall(r"^\| (\d+) \| (\d+) \| ([\d ]+) \| ([\d ]+) \| ([\d ]+) \| [\d ]+ \| "
                      r"[^|]+ \| ([a-z, 0-9]+) \|$", doc, flags=re.M)
    assert len(rows) == 6
    for d, B, *rates, used in rows:
        rates = [float(r.replace(" ", "")) for r in rates]
        assert rates[list(names).index(used)] >= 0.95 * max(rates), (d, B, used)
        assert launch_choice(int(d), int(B)) == names[used], (d, B)
