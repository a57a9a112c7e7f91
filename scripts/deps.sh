#!/usr/bin/env bash
# Installs attnkit's third-party build dependencies into .deps/ (ignored by git):
#   - CUTLASS/CuTe headers: the pinned nvidia-cutlass wheel, pip install --no-deps (headers only used)
#   - GoogleTest sources, copied from the system (Debian's googletest), so that a machine without
#     libgtest-dev (the GPU machine) can build the tests from the carried .deps/ folder.
# Idempotent: does nothing that is already done. `scripts/deps.sh cutlass` installs only CUTLASS
# (what a pip build of the Python package needs where nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
CUTLASS_VERSION=4.2.0.0
mkdir -p .deps

# CUTLASS is needed only where CUDA kernels are built (nvcc present and ATTNKIT_CUDA not OFF).
cuda_mode=$(printf '%s' "${ATTNKIT_CUDA:-AUTO}" | tr '[:lower:]' '[:upper:]')
want_cutlass=0
if [ "${1:-all}" = cutlass ]; then want_cutlass=1
elif [ "$cuda_mode" != OFF ] && command -v nvcc >/dev/null 2>&1; then want_cutlass=1; fi
if [ $want_cutlass = 1 ] && [ ! -f .deps/cutlass/.version-$CUTLASS_VERSION ]; then
  echo "deps: installing nvidia-cutlass==$CUTLASS_VERSION headers into .deps/cutlass"
  rm -rf .deps/cutlass
  python3 -m pip install --quiet --no-deps --no-compile --target .deps/cutlass \
    "nvidia-cutlass==$CUTLASS_VERSION"
  # Keep only the C++ headers: the wheel's Python parts are not used.
  find .deps/cutlass -mindepth 1 -maxdepth 1 ! -name cutlass_library -exec rm -rf {} +
  find .deps/cutlass/cutlass_library -mindepth 1 -maxdepth 1 ! -name source -exec rm -rf {} +
  find .deps/cutlass/cutlass_library/source -mindepth 1 -maxdepth 1 ! -name include -exec rm -rf {} +
  touch .deps/cutlass/.version-$CUTLASS_VERSION
fi

[ "${1:-all}" = cutlass ] && exit 0

if [ ! -f .deps/googletest/CMakeLists.txt ]; then
  if [ ! -f /usr/src/googletest/CMakeLists.txt ] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing googletest (Debian package)"
    (apt-get install -y -q googletest libgtest-dev >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null && apt-get install -y -q googletest libgtest-dev >/dev/null; })
  fi
  if [ -f /usr/src/googletest/CMakeLists.txt ]; then
    cp -r /usr/src/googletest .deps/googletest
  fi
fi
