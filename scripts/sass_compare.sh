#!/usr/bin/env bash
# Shows whether a change to device code changed the machine code: compiles the given translation
# units at git revision REV (default HEAD) and in the working tree, with the build folder's own
# compile commands (the same flags, archs and kernel filter), and compares their SASS function by
# function (scripts/sass_compare.py). A refactor that reports every function SAME needs no GPU
# A/B. No GPU needed; cuobjdump comes from the nvidia-cuda-cuobjdump wheel when it is not on PATH.
#   scripts/sass_compare.sh [-r REV] TU.cu...   e.g. src/cuda/instantiations/portable_decode_128_128_bf16.cu
# Environment: BUILD_DIR (default build; configured with Ninja by scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
REV=HEAD
if [ "${1:-}" = -r ]; then REV=$2; shift 2; fi
[ $# -ge 1 ] || { echo "usage: scripts/sass_compare.sh [-r REV] TU.cu..." >&2; exit 2; }
BUILD_DIR=${BUILD_DIR:-build}
[ -f "$BUILD_DIR/build.ninja" ] || { echo "sass_compare: configure $BUILD_DIR first (scripts/build.sh)" >&2; exit 2; }

if ! command -v cuobjdump >/dev/null 2>&1 || ! command -v nvdisasm >/dev/null 2>&1; then
  if ! find .deps/cuobjdump -name nvdisasm -type f 2>/dev/null | grep -q .; then
    echo "sass_compare: installing cuobjdump and nvdisasm (NVIDIA's wheels) into .deps/cuobjdump"
    rm -rf .deps/cuobjdump
    python3 -m pip install --quiet --no-deps --target .deps/cuobjdump \
      nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
  fi
  bin=$(dirname "$(find .deps/cuobjdump -name cuobjdump -type f | head -1)")
  chmod +x "$bin"/cuobjdump "$bin"/nvdisasm
  PATH=$bin:$PATH
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
git worktree add --detach -q "$WORK/rev" "$REV"
trap 'git worktree remove --force "$WORK/rev"; rm -rf "$WORK"' EXIT

status=0
for tu in "$@"; do
  rel=${tu#"$ROOT"/}
  case "$rel" in
    src/*) obj="src/CMakeFiles/attnkit_objs.dir/${rel#src/}.o" ;;
    *) echo "sass_compare: $rel is not a library source under src/" >&2; exit 2 ;;
  esac
  cmd=$(cd "$BUILD_DIR" && ninja -t commands "$obj" 2>/dev/null | tail -1)
  [ -n "$cmd" ] || { echo "sass_compare: no compile command for $rel in $BUILD_DIR" >&2; exit 2; }
  # The same command, without dependency output, into our own objects; the revision's copy reads
  # its own sources (include paths rewritten to the worktree).
  base=$(echo "$cmd" | sed -e 's# -MD -MT [^ ]* -MF [^ ]*##' -e 's# -o [^ ]*# -o OBJ#')
  name=$(basename "$rel" .cu)
  (cd "$BUILD_DIR" && eval "$(echo "$base" | sed -e "s#$ROOT/src#$WORK/rev/src#g" -e "s#$ROOT/include#$WORK/rev/include#g" \
      -e "s# -o OBJ# -o $WORK/$name.before.o#")")
  (cd "$BUILD_DIR" && eval "$(echo "$base" | sed -e "s# -o OBJ# -o $WORK/$name.after.o#")")
  cuobjdump -sass "$WORK/$name.before.o" > "$WORK/$name.before.sass"
  cuobjdump -sass "$WORK/$name.after.o" > "$WORK/$name.after.sass"
  echo "== $rel ($REV vs working tree)"
  python3 scripts/sass_compare.py "$WORK/$name.before.sass" "$WORK/$name.after.sass" || status=1
done
exit $status
