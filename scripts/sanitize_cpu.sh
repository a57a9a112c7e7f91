#!/usr/bin/env bash
# The CPU suite under AddressSanitizer + UndefinedBehaviorSanitizer: a CPU-only debug build
# (-O1, ATTNKIT_CUDA=OFF) in build-asan/, then the CPU tests, the edge-shape list against the
# naive loops, and the FP8 and append checks. Any sanitizer report fails it (UBSan does not
# recover; ASan aborts). Run by .ci/run after the README's test command, or on its own.
#   JOBS=2 scripts/sanitize_cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-asan}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$BUILD_DIR"
flags="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
gen=()
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DATTNKIT_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug \
  -DATTNKIT_BUILD_PYTHON=OFF -DATTNKIT_INSTALL=OFF -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" > "$BUILD_DIR/configure.log" 2>&1 ||
  { cat "$BUILD_DIR/configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j "$JOBS" --target attnkit_cpu_tests attnkit_cli
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
"$BUILD_DIR/tests/attnkit_cpu_tests" --gtest_brief=1
BIN="$BUILD_DIR/tools/attnkit"
"$BIN" check --edge-shapes --naive | tail -n 1
"$BIN" check --naive --paged --kv-fp8 token --seqlen-q 1 --seqlen-k 700 --heads-q 8 --heads-kv 2 --lse | tail -n 1
"$BIN" check --naive --op append-kv --kv-fp8 token --hnd | tail -n 1
"$BIN" check --naive --op gdn --varlen 0,64,1,130 --initial-state | tail -n 1
"$BIN" check --naive --op gdn-decode | tail -n 1
echo "sanitize_cpu: clean"
