#!/usr/bin/env bash
# The limit engines' device check, in one call on a GPU machine (docs/performance.md,
# "On a GPU"), sized to fit a device session with time to rerun it (about 8 minutes):
#
# 1. the device kernels alone (the one-read history pass, the direct triangular solves,
#    Muon's k × k work on the device, the sweep with its inputs in constant memory), so a
#    broken kernel shows in seconds;
# 2. every other GPU test: the CuPy engines against the NumPy engines number for number
#    (tests/test_limit_gpu.py: every engine, optimizer and layer kind that runs on a device,
#    float64 to 1e-10 with host draws), the finite networks' backend check, and the
#    kernel sources compiled by nvcc;
# 3. the benchmark's tables (bench_gpu.py): rooflines, the deep job as it runs and with the
#    staged device pieces, Muon and residual blocks, the passes, the solves, the one-hidden-layer
#    sweep, a profile of a deep run, and the horizon table at N = 10⁵.
#
# Logs go to $OUT (default /tmp/gpu_check).  Time limits per part: KERNELS_S, TESTS_S,
# BENCH_S (seconds); HORIZON: the T values of the horizon table (float64), HORIZON32 those
# of float32 storage (empty: none).
#
#     bash benchmarks/gpu_check.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" MPLBACKEND=Agg
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
nvidia-smi -L
python3 -c "import numpy, numba, scipy, cupy; print('numpy', numpy.__version__, 'numba',
numba.__version__, 'scipy', scipy.__version__, 'cupy', cupy.__version__)"
KERNELS="fused or trsm or muon_core or cuda_sweep or staged"
timeout "${KERNELS_S:-120}" python3 -m pytest -q -p no:cacheprovider -x \
    tests/test_limit_gpu.py -k "$KERNELS" > "$OUT/kernels.log" 2>&1
echo "kernel tests: exit $?"
grep -E "passed|failed|Error|assert" "$OUT/kernels.log" | tail -20
timeout "${TESTS_S:-300}" python3 -m pytest -q -p no:cacheprovider -rs \
    tests/test_limit_gpu.py tests/test_finite.py::test_cupy_backend_missing_or_matching \
    tests/test_cuda_source.py -k "not ($KERNELS)" > "$OUT/tests.log" 2>&1
echo "tests: exit $?"
grep -E "passed|failed|Error|assert" "$OUT/tests.log" | tail -40
cd benchmarks && timeout "${BENCH_S:-330}" python3 bench_gpu.py --staged --deep-Ns 100000,1000000 \
    --dtypes float64 --kinds muon,residual --passes --solves --profile 100000:400 \
    --horizon "${HORIZON:-500,1000,2000}" --horizon-dtypes float64 2>&1 | tee "$OUT/bench.log"
if [ -n "${HORIZON32:-}" ]; then
    timeout "${BENCH32_S:-120}" python3 bench_gpu.py --deep-Ns "" --one-N 0 \
        --horizon "$HORIZON32" --horizon-dtypes float32 2>&1 | tee "$OUT/bench32.log"
fi
