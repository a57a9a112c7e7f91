#!/usr/bin/env bash
# Fuzzes the ops' validation and CPU backend with libFuzzer under ASan + UBSan: a CPU-only clang
# build in build-fuzz/, then SECONDS_TO_RUN seconds (default 60) of fuzzing per target. Targets
# (fuzz/<name>_fuzz.cpp), named as arguments; none or `all` runs every one in turn:
#   attention     attention_forward            corpus build-fuzz/corpus
#   merge_states  merge_states                 corpus build-fuzz/corpus-merge_states
#   append_kv     append_kv_cache              corpus build-fuzz/corpus-append_kv
#   gdn           the Gated DeltaNet ops       corpus build-fuzz/corpus-gdn
# A crash leaves its input in build-fuzz/ as <name>-crash-<sha1> (leak-, timeout-, oom- alike);
# the other targets still run, and the script exits non-zero. FUZZ_ARGS adds libFuzzer flags;
# ATTNKIT_FUZZ_REPORT=1 makes each target print every input's status.
#   SECONDS_TO_RUN=600 JOBS=2 scripts/fuzz.sh
#   SECONDS_TO_RUN=120 scripts/fuzz.sh gdn append_kv
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
all=(attention merge_states append_kv gdn)
targets=()
for a in "$@"; do
  case "$a" in
    all) targets+=("${all[@]}") ;;
    attention | merge_states | append_kv | gdn) targets+=("$a") ;;
    *) echo "fuzz.sh: unknown target '$a' (expected: ${all[*]} or all)" >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
corpus_of() { if [ "$1" = attention ]; then echo corpus; else echo "corpus-$1"; fi; }
mkdir -p "$BUILD_DIR"
for t in "${targets[@]}"; do mkdir -p "$BUILD_DIR/$(corpus_of "$t")"; done
san="-O1 -g -fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
gen=()
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DATTNKIT_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=Debug -DATTNKIT_BUILD_FUZZERS=ON -DATTNKIT_BUILD_TESTS=OFF \
  -DATTNKIT_BUILD_TOOLS=OFF -DATTNKIT_BUILD_PYTHON=OFF -DATTNKIT_INSTALL=OFF \
  -DCMAKE_CXX_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  > "$BUILD_DIR/configure.log" 2>&1 || { cat "$BUILD_DIR/configure.log"; exit 1; }
exes=()
for t in "${targets[@]}"; do exes+=("attnkit_${t}_fuzz"); done
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${exes[@]}"
cd "$BUILD_DIR"
failed=()
for t in "${targets[@]}"; do
  echo "fuzz.sh: $t for ${SECONDS_TO_RUN:-60} s"
  # shellcheck disable=SC2086
  if ! "./fuzz/attnkit_${t}_fuzz" -max_total_time="${SECONDS_TO_RUN:-60}" -print_final_stats=1 \
      -artifact_prefix="$t-" ${FUZZ_ARGS:-} "$(corpus_of "$t")"; then
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: failed: ${failed[*]} (inputs in $BUILD_DIR/<target>-*)" >&2
  exit 1
fi
