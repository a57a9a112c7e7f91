#!/usr/bin/env bash
# Builds attnkit (scripts/build.sh) and runs every test with CTest: the CPU suite, the GPU suite
# (skipped, visibly, without a GPU) and the attnkit program's smoke tests. Extra arguments go to
# ctest (e.g. -R cpu). Exits non-zero if any test fails.
#   TEST_TIMEOUT  seconds allowed to each test (default 1800)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
scripts/build.sh || exit $?
BUILD_DIR=${BUILD_DIR:-build}

ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout "${TEST_TIMEOUT:-1800}" "$@"
rc=$?

# GoogleTest's own summary lines (ctest shows a test's output only when it fails).
log="$BUILD_DIR/Testing/Temporary/LastTest.log"
if [ -f "$log" ]; then
  echo
  echo "test summary (from $log):"
  grep -E '^([0-9]+/[0-9]+ Test: |\[==========\] .* ran\.|\[  PASSED  \]|\[  FAILED  \]|\[  SKIPPED \] [0-9]+ test|SKIPPED: |edge shapes: [0-9]+ passed)' "$log" |
    sed -E -e 's/^[0-9]+\/[0-9]+ Test: /-- /' -e 's/^/  /'
fi
exit $rc
