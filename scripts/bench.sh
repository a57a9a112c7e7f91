#!/usr/bin/env bash
# Builds attnkit (scripts/build.sh) and runs its benchmark: scripts/bench.sh [attnkit bench flags]
# e.g. scripts/bench.sh --shapes fa3 --json fa3.json. Without a GPU it runs the CPU reference
# backend on smaller shapes. For the side-by-side comparison with cuDNN / FlashAttention-2 /
# flash-linear-attention on a GPU machine, see bench/compare.py and scripts/gpu_round.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_TARGET=${BUILD_TARGET:-attnkit_cli} scripts/build.sh
exec "${BUILD_DIR:-build}/tools/attnkit" bench "$@"
