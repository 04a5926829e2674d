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


@needs_nvcc
@pytest.mark.parametrize("m, r", [(12, 4), (8, 0), (32, 16)])
def test_fused_history_pass_compiles_for_a_gpu(m, r, tmp_path):
    from tp_limits.limit.montecarlo.passes_cuda import cuda_source as pass_source
    _compiles(pass_source(m, r), tmp_path)


#: CUDA's thread model on host threads, enough for the history pass: one block at a time,
#: every CUDA thread an OS thread, __syncthreads a block barrier, a shuffle an exchange
#: through a buffer between two warp barriers, __shared__ a static (one block at a time)
THREADS_HOST = r"""
#include <barrier>
#include <thread>
#include <vector>
#include <cstdio>
#include <cstdlib>
struct dim3_ { unsigned x, y, z; };
static thread_local dim3_ threadIdx, blockIdx;
static dim3_ gridDim;
static std::barrier<>* block_bar;
static std::barrier<>* warp_bar[32];
static double shfl_buf[1024];
#define __global__
#define __launch_bounds__(...)
#define __shared__ static
static inline void __syncthreads() { block_bar->arrive_and_wait(); }
static inline double __shfl_xor_sync(unsigned, double v, int off) {
    const int t = threadIdx.x;
    shfl_buf[t] = v;
    warp_bar[t >> 5]->arrive_and_wait();
    const double r = shfl_buf[(t & ~31) | ((t & 31) ^ off)];
    warp_bar[t >> 5]->arrive_and_wait();
    return r;
}
template <class F> void launch(unsigned gx, unsigned gy, int nth, F f) {
    gridDim = {gx, gy, 1};
    for (unsigned by = 0; by < gy; ++by) for (unsigned bx = 0; bx < gx; ++bx) {
        std::barrier<> b(nth);
        block_bar = &b;
        for (int w = 0; w < nth / 32; ++w) warp_bar[w] = new std::barrier<>(32);
        std::vector<std::thread> th;
        for (int t = 0; t < nth; ++t)
            th.emplace_back([=] { threadIdx = {(unsigned)t, 0, 0}; blockIdx = {bx, by, 0}; f(); });
        for (auto& x : th) x.join();
        for (int w = 0; w < nth / 32; ++w) delete warp_bar[w];
    }
}
"""

PASS_MAIN = r"""
int main(int argc, char** argv) {
    const long long k = atoll(argv[1]), N = atoll(argv[2]), per = atoll(argv[3]);
    const long long cb = (N + NTH * P - 1) / (NTH * P), splits = (k + per - 1) / per;
    std::vector<double> R(k * N), C(k * M), Z(M * N), Zp(splits * M * N + 1),
        Xp(cb * k * (RR ? RR : 1) + 1);
    FILE* f = fopen(argv[4], "rb");
    if (fread(R.data(), 8, k * N, f) + fread(C.data(), 8, k * M, f)
        + fread(Z.data(), 8, M * N, f) != (size_t)(k * N + k * M + M * N)) return 1;
    fclose(f);
    launch(cb, splits, NTH, [&] { mean_cross(R.data(), C.data(), Z.data(), Zp.data(),
                                             Xp.data(), k, N, per); });
    f = fopen(argv[5], "wb");
    fwrite(Z.data(), 8, M * N, f);
    fwrite(Zp.data(), 8, splits * M * N, f);
    fwrite(Xp.data(), 8, cb * k * RR, f);
    fclose(f);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (host C++20)")
@pytest.mark.parametrize("m, r, k, N, per", [(12, 4, 40, 1100, 32), (4, 4, 5, 3000, 32),
                                             (8, 0, 40, 777, 64), (20, 16, 9, 600, 32)])
def test_fused_history_pass_on_host_threads(m, r, k, N, per, tmp_path):
    """The one-read history pass (passes_cuda.py), its own CUDA source compiled for the host
    with threads standing in for CUDA's: the new rows Z + Cᵀ R (in place, or as row-split
    partial sums) and the partial cross products R Z_oldᵀ per column block, which with
    N · Ch C[:, :r] give R Z_newᵀ — against NumPy, over several row splits and ragged
    column and row tails."""
    from tp_limits.limit.montecarlo.passes_cuda import THREADS, columns_per_thread
    from tp_limits.limit.montecarlo.passes_cuda import cuda_source as pass_source
    src, exe = tmp_path / "pass.cpp", tmp_path / "pass"
    src.write_text(THREADS_HOST + pass_source(m, r).replace('extern "C" ', "") + PASS_MAIN)
    subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-o", str(exe), str(src)],
                   check=True, capture_output=True, timeout=300)
    rng = np.random.default_rng(k)
    R, C, Z = rng.standard_normal((k, N)), rng.standard_normal((k, m)), \
        rng.standard_normal((m, N))
    (tmp_path / "in.bin").write_bytes(R.tobytes() + C.tobytes() + Z.tobytes())
    subprocess.run([str(exe), str(k), str(N), str(per), str(tmp_path / "in.bin"),
                    str(tmp_path / "out.bin")], check=True, timeout=300)
    cb, splits = -(-N // (THREADS * columns_per_thread(m))), -(-k // per)
    out = np.fromfile(tmp_path / "out.bin")
    Zk, out = out[:m * N].reshape(m, N), out[m * N:]
    Zp, Xp = out[:splits * m * N].reshape(splits, m, N), out[splits * m * N:]
    new = Z + C.T @ R
    got = Zk if splits == 1 else Z + Zp.sum(axis=0)
    assert np.allclose(got, new, rtol=1e-13, atol=1e-12)
    if r:
        cross = Xp.reshape(cb, k, r).sum(axis=0) + R @ R.T @ C[:, :r]
        assert np.allclose(cross, R @ new[:r].T, rtol=1e-12, atol=1e-9)
