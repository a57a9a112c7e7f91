#!/usr/bin/env bash
# Fuzzes attention_forward's validation and CPU backend (fuzz/attention_fuzz.cpp) with libFuzzer
# under ASan + UBSan: a CPU-only clang build in build-fuzz/, then SECONDS_TO_RUN seconds (default
# 60) of fuzzing from the corpus in build-fuzz/corpus. A crash leaves its input in build-fuzz/ and
# exits non-zero.
#   SECONDS_TO_RUN=600 JOBS=2 scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$BUILD_DIR/corpus"
san="-O1 -g -fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
gen=()
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DATTNKIT_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=Debug -DATTNKIT_BUILD_FUZZERS=ON -DATTNKIT_BUILD_TESTS=OFF \
  -DATTNKIT_BUILD_TOOLS=OFF -DATTNKIT_BUILD_PYTHON=OFF -DATTNKIT_INSTALL=OFF \
  -DCMAKE_CXX_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  > "$BUILD_DIR/configure.log" 2>&1 || { cat "$BUILD_DIR/configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j "$JOBS" --target attnkit_attention_fuzz
cd "$BUILD_DIR"
./fuzz/attnkit_attention_fuzz -max_total_time="${SECONDS_TO_RUN:-60}" -print_final_stats=1 corpus
