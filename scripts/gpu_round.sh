#!/usr/bin/env bash
# The whole GPU round in one call, on a GPU machine (CUDA toolkit, PyTorch; no network needed when
# .deps/ — and optionally .whl/ — were carried along):
#   wheels  install any wheels carried in .whl/ (e.g. fla-core for the Gated DeltaNet anchor)
#   build   attnkit for sm_90a into build-gpu/ (-j16)
#   info    nvidia-smi -L and `attnkit info`
#   test    ctest, GPU tests included
#   edge    attnkit check --edge-shapes (GPU backends against the CPU reference)
#   python  the Python package built in build-gpu (the extension from the same objects, no second
#           kernel build): its tests (python/tests: torch, CUDA graphs, torch.compile, transformers
#           models) and bench/python_overhead.py (host time per decode call)
#   peer    scripts/peer_tests.sh: FlashAttention-3's and flash-linear-attention's own tests against
#           attnkit's drop-in modules (needs the fetched tests in .peer/, and einops / fla-core)
#   sanitize  scripts/sanitize.sh: compute-sanitizer memcheck / racecheck / synccheck on small
#           cases of every kernel family
#   tma     (not in the default list) the Hopper TMA decode kernel: its GPU tests, the decode set
#           on the thread-copy kernel (--decode-kernel threads) and on the TMA kernel beside the
#           anchors (the bench phase runs the planner's own choice)
#   bench   bench/compare.py: attnkit bench and the anchors (cuDNN, FA2, fla) in the same run, and
#           bench/plot_results.py's plot of it (compare/results.png) where matplotlib is installed
#   stages  bench/gdn_bench: Gated DeltaNet per stage (chunk output and decode against the bytes
#           they move) and a device copy as the bandwidth ceiling
#   accuracy  bench/gdn_accuracy.py: Gated DeltaNet's error against the fp32 recurrent reference,
#           attnkit's and fla's on the same inputs (needs the fla-core wheel)
# Every phase is timed and has a time limit; a failing phase is reported and the round goes on.
# The last lines printed are a summary table. Exit status: non-zero if any phase failed.
#
# Environment:
#   GPU_ROUND_PHASES   phases to run (default: "wheels build info test edge sanitize bench
#                      stages accuracy"); a round that must fit a short time slot can be split, e.g.
#                      "wheels build" then "test edge bench"
#   GPU_ROUND_SHAPES   shape sets for the bench phase (default: "default"; all: "default fa3 decode fp8kv
#                      gdn gdn-serving")
#   GPU_ROUND_BACKEND  attnkit bench --backend for the bench phase (default: auto), e.g.
#                      cuda-portable to time the portable kernels next to the anchors of the same run
#   GPU_ROUND_ARCHS    CUDA architectures (default: 90a)
#   GPU_ROUND_JOBS     build jobs (default: 16)
#   GPU_ROUND_TEST_TIMEOUT / _EDGE_TIMEOUT / _SANITIZE_TIMEOUT / _BENCH_TIMEOUT / _BUILD_TIMEOUT
#                      seconds per phase
#   OUT                if set, the summary, comparison tables/JSON and a tarball of all logs go there
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)

PHASES=${GPU_ROUND_PHASES:-"wheels build info test edge python peer sanitize bench stages accuracy"}
SHAPES=${GPU_ROUND_SHAPES:-default}
BUILD_DIR=build-gpu
LOGS=$ROOT/out/gpu_round
BIN=$ROOT/$BUILD_DIR/tools/attnkit
rm -rf "$LOGS"
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1

SUMMARY=()
FAILED=0
ROUND_T0=$(date +%s)

# phase NAME LIMIT_SECONDS COMMAND...: runs the command with a time limit, output teed to a log.
phase() {
  local name=$1 limit=$2
  shift 2
  local log="$LOGS/$name.log" t0 rc dt status
  echo
  echo "==== gpu_round: $name (limit ${limit}s) ===="
  t0=$(date +%s)
  timeout -k 15 "$limit" "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  dt=$(($(date +%s) - t0))
  case $rc in
    0) status=ok ;;
    124 | 137) status="TIMEOUT (${limit}s)" ;;
    *) status="FAIL (exit $rc)" ;;
  esac
  [ "$rc" -ne 0 ] && FAILED=1
  SUMMARY+=("$name|$status|$dt|$(phase_note "$name" "$log")")
}

skip() {
  echo
  echo "==== gpu_round: $1 skipped: $2 ===="
  SUMMARY+=("$1|skipped|0|$2")
}

# One line from a phase's log for the summary.
phase_note() {
  local log=$2
  case $1 in
    wheels) grep -m1 -E '^wheels:' "$log" ;;
    build) { grep -m1 -E 'error:|FAILED:' "$log" || tail -n1 "$log"; } | cut -c1-100 ;;
    info) grep -m1 -E '^GPU 0|^device:' "$log" | cut -c1-100 ;;
    test) grep -m1 -E 'tests passed|tests failed' "$log" ;;
    edge) grep -m1 -E '^edge shapes: [0-9]+ passed' "$log" ;;
    python) grep -E '^=* ?[0-9]+ (passed|failed)' "$log" | tail -n1 ;;
    peer) grep -E '(passed|failed)' "$log" | tail -n1 ;;
    sanitize) grep -m1 -E '^sanitize:' "$log" ;;
    bench) grep -m1 -E '^failed steps:' "$log" || echo "tables: compare.md" ;;
    stages) grep -m1 -E '^copy' "$log" | tr -s ' ' ;;
    accuracy) grep -E '^[A-Za-z0-9_]+: attnkit o rel_l2' "$log" | tail -n1 ;;
  esac 2>/dev/null | head -c 110
}

want() { [[ " $PHASES " == *" $1 "* ]]; }

if want wheels; then
  if compgen -G ".whl/*.whl" >/dev/null; then
    phase wheels 300 bash -c 'python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl &&
      echo "wheels: installed $(ls .whl/*.whl | wc -l) into /tmp/site: $(cd .whl && ls *.whl | cut -d- -f1 | tr "\n" " ")"'
  else
    skip wheels "no .whl/*.whl carried"
  fi
fi
[ -d /tmp/site ] && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}

if want build; then
  # The Python extension too, from the same objects, where nanobind is installed.
  # Every kernel: the GPU suite covers all head dims and dtypes (CI compiles a subset).
  py_args="-DATTNKIT_KERNEL_HEAD_DIMS=all -DATTNKIT_KERNEL_DTYPES=all"
  if python3 -c 'import nanobind' 2>/dev/null; then
    py_args="$py_args -DATTNKIT_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(command -v python3)"
  fi
  phase build "${GPU_ROUND_BUILD_TIMEOUT:-1200}" env ATTNKIT_CUDA=ON ATTNKIT_CUDA_ARCHS="${GPU_ROUND_ARCHS:-90a}" \
    JOBS="${GPU_ROUND_JOBS:-16}" BUILD_DIR=$BUILD_DIR CMAKE_EXTRA_ARGS="$py_args" scripts/build.sh
fi
# The Python package as the build made it: the sources beside the extension (python_tests.sh
# stages them in $BUILD_DIR/python-pkg; the peer phase imports that).
PYPKG=$ROOT/$BUILD_DIR/python-pkg

if want info; then
  phase info 60 bash -c "nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; \
    nvcc --version | tail -2; python3 -c 'import torch; print(\"torch\", torch.__version__)' || true; \
    if [ -x '$BIN' ]; then '$BIN' info; else echo 'attnkit not built'; fi"
fi

if want test; then
  if [ -f $BUILD_DIR/CTestTestfile.cmake ]; then
    phase test "${GPU_ROUND_TEST_TIMEOUT:-600}" ctest --test-dir $BUILD_DIR --output-on-failure \
      --timeout "${GPU_ROUND_TEST_TIMEOUT:-600}"
    cp $BUILD_DIR/Testing/Temporary/LastTest.log "$LOGS/ctest_full.log" 2>/dev/null
  else
    skip test "no $BUILD_DIR (build first)"
  fi
fi

if want edge; then
  if [ -x "$BIN" ]; then
    phase edge "${GPU_ROUND_EDGE_TIMEOUT:-300}" "$BIN" check --edge-shapes
  else
    skip edge "attnkit not built"
  fi
fi

if want python; then
  if compgen -G "$BUILD_DIR/python/_C*.so" >/dev/null; then
    phase python "${GPU_ROUND_PYTHON_TIMEOUT:-900}" bash -c "BUILD_DIR=$BUILD_DIR scripts/python_tests.sh &&
      PYTHONPATH='$PYPKG':\${PYTHONPATH:-} python3 bench/python_overhead.py --json '$LOGS/python_overhead.json'"
  else
    skip python "no extension in $BUILD_DIR/python (nanobind missing at build time?)"
  fi
fi

if want peer; then
  if [ -d "$PYPKG" ] && [ -d .peer ]; then
    phase peer "${GPU_ROUND_PEER_TIMEOUT:-900}" env LOGS="$LOGS/peer" PYTHONPATH="$PYPKG${PYTHONPATH:+:$PYTHONPATH}" \
      scripts/peer_tests.sh
  else
    skip peer "needs the Python package and the fetched suites in .peer/ (tests/peer/README.md)"
  fi
fi

if want sanitize; then
  if [ -x "$BIN" ]; then
    phase sanitize "${GPU_ROUND_SANITIZE_TIMEOUT:-900}" scripts/sanitize.sh "$BIN"
  else
    skip sanitize "attnkit not built"
  fi
fi

if want tma; then
  if [ -x "$BIN" ]; then
    phase tma "${GPU_ROUND_TMA_TIMEOUT:-900}" bash -c "$BUILD_DIR/tests/attnkit_cuda_tests \
      --gtest_filter='Sm90Decode*' && '$BIN' bench --shapes decode --decode-kernel threads \
      --json '$LOGS/threads.json' && '$BIN' bench --shapes decode --decode-kernel sm90tma \
      --json '$LOGS/tma.json' && python3 bench/compare.py --attnkit '$BIN' --shapes decode \
      --attnkit-json '$LOGS/tma.json' --out '$LOGS/compare_tma'"
  else
    skip tma "attnkit not built"
  fi
fi

if want bench; then
  if [ -x "$BIN" ]; then
    phase bench "${GPU_ROUND_BENCH_TIMEOUT:-900}" python3 bench/compare.py --attnkit "$BIN" \
      --shapes "$(echo "$SHAPES" | tr ' ' ',')" --backend "${GPU_ROUND_BACKEND:-auto}" --out "$LOGS/compare"
    # The per-shape plot of this run (the README's docs/img/results.png comes from such runs).
    if [ -f "$LOGS/compare/compare.json" ] && python3 -c "import matplotlib" 2>/dev/null; then
      python3 bench/plot_results.py "$LOGS/compare/results.png" "$LOGS/compare/compare.json" ||
        echo "gpu_round: plot_results failed (the tables stand)"
    fi
  else
    skip bench "attnkit not built"
  fi
fi

if want stages; then
  if [ -x "$BUILD_DIR/bench/gdn_bench" ]; then
    phase stages "${GPU_ROUND_STAGES_TIMEOUT:-300}" "$BUILD_DIR/bench/gdn_bench"
  else
    skip stages "no $BUILD_DIR/bench/gdn_bench (a CUDA build makes it)"
  fi
fi

if want accuracy; then
  if [ -x "$BIN" ]; then
    phase accuracy "${GPU_ROUND_ACCURACY_TIMEOUT:-600}" python3 bench/gdn_accuracy.py --attnkit "$BIN" \
      --out "$LOGS/compare"
  else
    skip accuracy "attnkit not built"
  fi
fi

# ---- summary (printed last) and results
ROUND_DT=$(($(date +%s) - ROUND_T0))
{
  echo "gpu_round summary: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nvidia-smi -L 2>/dev/null | head -1 | cut -c1-60), tree $(scripts/tree_hash.sh 2>/dev/null || echo '?') (scripts/tree_hash.sh on a commit gives the same for the same sources)"
  printf '%-7s %-18s %6s  %s\n' phase status secs note
  printf '%-7s %-18s %6s  %s\n' ------- ------------------ ------ ----
  for row in "${SUMMARY[@]}"; do
    IFS='|' read -r n s t note <<<"$row"
    printf '%-7s %-18s %6s  %s\n' "$n" "$s" "$t" "$note"
  done
  echo "total ${ROUND_DT}s; $([ $FAILED -eq 0 ] && echo 'all phases ok' || echo 'SOME PHASES FAILED')"
} >"$LOGS/summary.txt"

if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  cp "$LOGS/summary.txt" "$OUT/" 2>/dev/null
  cp "$LOGS/compare/compare.md" "$LOGS/compare/compare.json" "$LOGS/compare/results.png" \
    "$LOGS/compare/gdn_accuracy.json" \
    "$LOGS/python_overhead.json" "$OUT/" 2>/dev/null
  tar -C "$ROOT/out" -czf "$OUT/gpu_round_logs.tar.gz" gpu_round 2>/dev/null
  echo "gpu_round: results in \$OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
fi
if [ -f "$LOGS/compare/compare.md" ]; then
  echo
  sed -n '/^## /,$p' "$LOGS/compare/compare.md" | grep -v '^$' | cut -c1-180
fi
if [ -f "$LOGS/stages.log" ]; then
  echo
  grep -E '^(device|copy|decode|forward)' "$LOGS/stages.log" | cut -c1-180
fi
if [ -f "$LOGS/accuracy.log" ]; then
  echo
  sed -n '/^## Gated DeltaNet accuracy/,$p' "$LOGS/accuracy.log" | grep -v '^$'
fi
echo
cat "$LOGS/summary.txt"
exit $FAILED
