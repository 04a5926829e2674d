#!/usr/bin/env bash
# The limit engines' device check, in one call on a GPU machine (docs/performance.md,
# "On a GPU"): the CuPy engines against the NumPy engines number for number
# (tests/test_limit_gpu.py: every engine and optimizer, float64 to 1e-10 with host draws),
# then the benchmark's tables (rooflines, the newer engines' times, the passes, the
# largest horizon).  Logs go to $OUT (default /tmp/gpu_check).
#
#     bash benchmarks/gpu_check.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
nvidia-smi -L
python3 -c "import numpy, numba, scipy, cupy; print('numpy', numpy.__version__, 'numba',
numba.__version__, 'scipy', scipy.__version__, 'cupy', cupy.__version__)"
timeout "${TESTS_S:-300}" python3 -m pytest -q -p no:cacheprovider -rs \
    tests/test_limit_gpu.py tests/test_finite.py::test_cupy_backend_missing_or_matching \
    > "$OUT/tests.log" 2>&1
echo "tests: exit $?"
grep -E "passed|failed|Error|assert" "$OUT/tests.log" | tail -40
cd benchmarks && timeout "${BENCH_S:-240}" python3 bench_gpu.py --kinds muon,residual \
    --passes --largest-T 2>&1 | tee "$OUT/bench.log"
