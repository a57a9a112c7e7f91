#!/usr/bin/env bash
# One GPU call for the sm90 paged / head-dim work: build, the sm90 GPU tests (or the whole suite
# with FULL=1), compute-sanitizer memcheck + racecheck on a small paged case, and the paged
# prefill bench (sm90 auto dispatch, then the portable kernels on the same shapes).
# Logs go to $OUT when set. Run from the repository root on the GPU machine.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
O=${OUT:-out}
mkdir -p "$O"
export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s)
OUT= GPU_ROUND_PHASES=build bash scripts/gpu_round.sh >"$O/build.log" 2>&1
echo "build rc=$? ($(($(date +%s) - t0)) s)"; grep -m3 -E "error|FAILED" "$O/build.log" | cut -c1-300
T=build-gpu/tests/attnkit_cuda_tests
A=build-gpu/tools/attnkit
t0=$(date +%s)
if [ "${FULL:-0}" = 1 ]; then
  timeout 200 ctest --test-dir build-gpu --output-on-failure >"$O/tests.log" 2>&1
else
  timeout 120 $T --gtest_filter='Sm90*' >"$O/tests.log" 2>&1
fi
echo "tests rc=$? ($(($(date +%s) - t0)) s)"
grep -E "tests passed|tests failed|^\[  PASSED|^\[  FAILED|FAILED  \]|Failure|Expected|Which is|rel_l2|kernel=" "$O/tests.log" | head -40 | cut -c1-300
timeout 60 $A bench --shapes paged 2>&1 | tee "$O/bench_auto.log" | tail -9
timeout 90 $A bench --shapes paged --backend cuda-portable 2>&1 | tee "$O/bench_portable.log" | tail -8
S="$A check --backend cuda-sm90 --paged --page-size 128 --varlen-q 100,1,40 --varlen-k 300,129,40 --heads-q 8 --heads-kv 2 --mask causal --lse"
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $S >"$O/$tool.log" 2>&1
  echo "$tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' "$O/$tool.log" | head -2 | tr '\n' ' ')"
done
