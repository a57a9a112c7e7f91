#!/usr/bin/env bash
# One GPU call for the sm90 paged / head-dim work: build the GPU test binary and the CLI, the sm90
# GPU tests (or the whole GPU suite with FULL=1), compute-sanitizer memcheck + racecheck on a small
# paged case (SANITIZE=1, the default), and the paged and head-dim prefill benches (sm90 by auto
# dispatch, then the portable kernels on the same shapes). Logs go to $OUT when set. Run from the
# repository root on the GPU machine.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
O=${OUT:-out}
mkdir -p "$O"
export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s)
{ ATTNKIT_CUDA=ON scripts/deps.sh &&
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTNKIT_CUDA=ON -DATTNKIT_CUDA_ARCHS=90a &&
  cmake --build build-gpu -j 16 --target attnkit_cuda_tests attnkit_cli; } >"$O/build.log" 2>&1
echo "build rc=$? ($(($(date +%s) - t0)) s)"; grep -m3 -E "error|FAILED" "$O/build.log" | cut -c1-300
T=build-gpu/tests/attnkit_cuda_tests
A=build-gpu/tools/attnkit
t0=$(date +%s)
filter='Sm90*'
[ "${FULL:-0}" = 1 ] && filter='*'
timeout "${TEST_TIMEOUT:-120}" $T --gtest_filter="$filter" >"$O/tests.log" 2>&1
echo "tests ($filter) rc=$? ($(($(date +%s) - t0)) s)"
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|FAILED  \]|Failure|Which is|rel_l2|kernel=" "$O/tests.log" | head -30 | cut -c1-300
for s in paged dims; do
  timeout 40 $A bench --shapes $s 2>&1 | tee "$O/bench_${s}_auto.log" | grep -E "^attention"
  timeout 60 $A bench --shapes $s --backend cuda-portable 2>&1 | tee "$O/bench_${s}_portable.log" | grep -E "^attention"
done
if [ "${SANITIZE:-1}" = 1 ]; then
  S="$A check --backend cuda-sm90 --paged --page-size 128 --varlen-q 100,1,40 --varlen-k 300,129,40 --heads-q 8 --heads-kv 2 --mask causal --lse"
  for tool in memcheck racecheck; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $S >"$O/$tool.log" 2>&1
    echo "$tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/$tool.log" | head -1)"
  done
fi
