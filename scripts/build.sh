#!/usr/bin/env bash
# Installs the build dependencies (scripts/deps.sh), then configures and builds attnkit (library,
# the attnkit program, tests) in Release mode into build/. Run it from anywhere; re-running only
# rebuilds what changed.
#
# Environment:
#   ATTNKIT_CUDA        AUTO (default: CUDA kernels when nvcc is found), ON or OFF
#   ATTNKIT_CUDA_ARCHS  CUDA architectures, e.g. 90a (default) or "80;90a"
#   JOBS                parallel build jobs (default: all cores)
#   BUILD_DIR           build folder (default: build)
#   BUILD_TYPE          CMake build type (default: Release)
#   BUILD_TARGET        build only this target (default: everything), e.g. attnkit_cli
#   CMAKE_EXTRA_ARGS    more CMake arguments (split on spaces), e.g. -DATTNKIT_BUILD_PYTHON=ON
set -euo pipefail
cd "$(dirname "$0")/.."

ATTNKIT_CUDA=$(printf '%s' "${ATTNKIT_CUDA:-AUTO}" | tr '[:lower:]' '[:upper:]')
export ATTNKIT_CUDA
case "$ATTNKIT_CUDA" in AUTO|ON|OFF) ;; *) echo "build: ATTNKIT_CUDA must be AUTO, ON or OFF" >&2; exit 2;; esac
# nvcc is often installed but not on PATH.
if [ "$ATTNKIT_CUDA" != OFF ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

scripts/deps.sh

args=(-S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" -DATTNKIT_CUDA="$ATTNKIT_CUDA")
if [ -n "${ATTNKIT_CUDA_ARCHS:-}" ]; then args+=(-DATTNKIT_CUDA_ARCHS="$ATTNKIT_CUDA_ARCHS"); fi
# shellcheck disable=SC2206
if [ -n "${CMAKE_EXTRA_ARGS:-}" ]; then args+=($CMAKE_EXTRA_ARGS); fi
# The generator can only be chosen when the folder is first configured.
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then args+=(-G Ninja); fi

echo "build: configuring $BUILD_DIR (ATTNKIT_CUDA=$ATTNKIT_CUDA${ATTNKIT_CUDA_ARCHS:+, archs $ATTNKIT_CUDA_ARCHS})"
cmake "${args[@]}"
echo "build: building ${BUILD_TARGET:-everything} with $JOBS jobs"
cmake --build "$BUILD_DIR" -j "$JOBS" ${BUILD_TARGET:+--target "$BUILD_TARGET"}
echo "build: done: $BUILD_DIR/tools/attnkit"
