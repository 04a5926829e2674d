#!/usr/bin/env bash
# The limit engines' device check, in one call on a GPU machine (docs/performance.md,
# "On a GPU"), sized to fit a device session with time to rerun it (about 8 minutes):
#
# 1. the device kernels alone (the one-hidden sweep in its three variants, Muon's k × k work
#    on the device), so a broken kernel shows in seconds;
# 2. every other GPU test: the CuPy engines against the NumPy engines number for number
#    (tests/test_limit_gpu.py: every engine, optimizer and layer kind that runs on a device,
#    float64 to 1e-10 with host draws), the finite networks' backend check, and the
#    kernel sources compiled by nvcc;
# 3. the benchmark's tables (bench_gpu.py): rooflines, the deep job at N = 10⁶, Muon (its
#    core on the device and on the host), the passes, the one-hidden-layer sweep, a
#    profile of a deep run, and the horizon table at N = 10⁵.
#
# One call on an H200 (2026-11-28, XDIST=8) took 329 s with the horizon T = 1000, 2000.
#
# Logs go to $OUT (default /tmp/gpu_check).  Time limits per part: KERNELS_S, TESTS_S,
# BENCH_S (seconds); XDIST: pytest-xdist workers for the tests (0: none; the machine's
# cores compile Numba and the CPU side of each comparison in parallel); HORIZON: the T
# values of the horizon table (float64), HORIZON32 those of float32 storage (empty:
# none); BENCH_ARGS replaces the benchmark's arguments.  SPECTRAL_ADAM=1 adds the
# Adam-direction study of docs/results.md (studies/spectral_adam.py on CuPy; widths
# SPECTRAL_WIDTHS, seeds SPECTRAL_SEEDS, limit SPECTRAL_ADAM_S) after the benchmark.
#
#     bash benchmarks/gpu_check.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" MPLBACKEND=Agg
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
nvidia-smi -L
python3 -c "import numpy, numba, scipy, cupy; print('numpy', numpy.__version__, 'numba',
numba.__version__, 'scipy', scipy.__version__, 'cupy', cupy.__version__)"
KERNELS="muon_core or cuda_sweep"
XD=()
if [ "${XDIST:-0}" != 0 ]; then XD=(-n "$XDIST"); fi
timeout "${KERNELS_S:-120}" python3 -m pytest -q -p no:cacheprovider -rs "${XD[@]}" \
    tests/test_limit_gpu.py -k "$KERNELS" > "$OUT/kernels.log" 2>&1
echo "kernel tests: exit $?"
grep -E "passed|failed|FAILED|Error|assert" "$OUT/kernels.log" | tail -20
timeout "${TESTS_S:-300}" python3 -m pytest -q -p no:cacheprovider -rs "${XD[@]}" \
    tests/test_limit_gpu.py tests/test_finite.py::test_cupy_backend_missing_or_matching \
    tests/test_cuda_source.py -k "not ($KERNELS)" > "$OUT/tests.log" 2>&1
echo "tests: exit $?"
grep -E "passed|failed|FAILED|Error|assert" "$OUT/tests.log" | tail -40
BENCH_ARGS=${BENCH_ARGS:---deep-Ns 1000000 --dtypes float64 --kinds muon --passes \
--profile 1000000:200 --horizon ${HORIZON:-1000,2000} --horizon-dtypes float64}
# shellcheck disable=SC2086  # the arguments are words
(cd benchmarks && timeout "${BENCH_S:-330}" python3 bench_gpu.py $BENCH_ARGS) 2>&1 \
    | tee "$OUT/bench.log"
cd benchmarks || exit 1
if [ -n "${HORIZON32:-}" ]; then
    timeout "${BENCH32_S:-120}" python3 bench_gpu.py --deep-Ns "" --one-N 0 \
        --horizon "$HORIZON32" --horizon-dtypes float32 2>&1 | tee "$OUT/bench32.log"
fi
if [ -n "${SPECTRAL_ADAM:-}" ]; then
    # the Adam-direction rules of docs/results.md at the widths two cores cannot reach
    (cd .. && timeout "${SPECTRAL_ADAM_S:-240}" python3 studies/spectral_adam.py --backend cupy \
        --widths ${SPECTRAL_WIDTHS:-2048 4096 8192} --seeds "${SPECTRAL_SEEDS:-16}" \
        --rules ns5 sn control) 2>&1 | tee "$OUT/spectral_adam.log"
fi
