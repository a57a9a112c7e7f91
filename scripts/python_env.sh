#!/usr/bin/env bash
# Makes the virtual environment the Python package is built and tested in (default build/venv),
# with numpy, pytest, nanobind and scikit-build-core from the package registry, and prints the path
# of its python. PY_VENV=system prints python3 and installs nothing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
VENV=${PY_VENV:-build/venv}
if [ "$VENV" = system ]; then
  command -v python3
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" >&2 || { echo "python_env: cannot create a virtual environment in $VENV" >&2; exit 1; }
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check numpy pytest nanobind scikit-build-core >&2 ||
  { echo "python_env: pip could not install numpy, pytest, nanobind, scikit-build-core" >&2; exit 1; }
echo "$(cd "$VENV" && pwd)/bin/python"
