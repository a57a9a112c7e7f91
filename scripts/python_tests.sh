#!/usr/bin/env bash
# Runs the Python package's tests (python/tests, pytest) on the extension a CMake build made with
# -DATTNKIT_BUILD_PYTHON=ON (scripts/test.sh and scripts/gpu_round.sh build it from the library's
# own objects, so no kernel is compiled twice): the package sources and the extension are staged
# together in <build>/python-pkg. The torch, GPU and transformers tests report themselves skipped
# where torch, a GPU or transformers is missing.
#   BUILD_DIR  the CMake build (default: build)
#   PY         the python to run (default: python3)
# Extra arguments go to pytest.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD_DIR=${BUILD_DIR:-build}
PY=${PY:-python3}
if ! compgen -G "$BUILD_DIR/python/_C*.so" >/dev/null; then
  echo "python tests: no extension in $BUILD_DIR/python (configure with -DATTNKIT_BUILD_PYTHON=ON)" >&2
  exit 1
fi
PKG=$BUILD_DIR/python-pkg
rm -rf "$PKG" && mkdir -p "$PKG" && cp -r python/attnkit "$PKG/" && cp "$BUILD_DIR"/python/_C*.so "$PKG/attnkit/"
export PYTHONPATH=$(cd "$PKG" && pwd)${PYTHONPATH:+:$PYTHONPATH}
cd python/tests || exit 1
"$PY" -m pytest -q -rs -p no:cacheprovider "$@"
