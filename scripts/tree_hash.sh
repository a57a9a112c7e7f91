#!/usr/bin/env bash
# Prints a short hash of the source tree's contents (the folders a build and a GPU round read), so
# that a GPU round's summary can be matched to a commit: the GPU machine gets a copy of the working
# tree whose git metadata may be stale, but these files are what ran. Run it here on a commit and
# compare with the `tree` field of the round's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
find CMakeLists.txt cmake include src tools tests bench scripts examples -type f \
  -not -path '*/__pycache__/*' -not -path 'bench/results/*' -not -name 'RESULTS.md' -not -name '*.pyc' \
  -print0 | LC_ALL=C sort -z | xargs -0 sha1sum | sha1sum | cut -c1-12
