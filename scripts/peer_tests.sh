#!/usr/bin/env bash
# Runs the anchors' own test suites against attnkit's drop-in modules (tests/peer/README.md), on
# a GPU machine where attnkit, torch, einops and fla-core are importable. The fetched test files
# must be in .peer/fa3/ and .peer/fla/ (never committed). Prints each suite's pass / fail / skip
# counts and its failures grouped by message; logs go to $LOGS (default out/peer).
#   PEER_SUITES          suites to run (default: "fa3 fla fla-baseline"); fla-baseline runs fla's
#                        tests on fla's own kernels, for comparison
#   ATTNKIT_PEER_SAMPLE  FlashAttention-3 cases per test function (default 200; 0 = all)
#   PEER_PYTEST_ARGS     extra pytest arguments for every suite (e.g. "-k fused_recurrent")
# Exit status: non-zero if a suite could not run (failing tests are reported, not fatal: missing
# features fail by design).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
LOGS=${LOGS:-$ROOT/out/peer}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1
rc=0

summarise() {  # log
  grep -E '^(=+ .*(passed|failed|skipped|error).* =+|[0-9]+ (passed|failed|skipped))' "$1" | tail -n1
  echo "  failures by exception (the first line of each traceback's error):"
  grep -E '^E +[A-Za-z_.]*(Error|Exception|Interrupt)\b' "$1" | sed -E 's/^E +//' | cut -c1-110 |
    sort | uniq -c | sort -rn | head -n 15 | sed 's/^/  /'
}

for suite in ${PEER_SUITES:-fa3 fla fla-baseline}; do
  echo "==== peer suite: $suite ===="
  case $suite in
    fa3)
      if [ ! -f .peer/fa3/test_flash_attn.py ]; then echo "missing .peer/fa3/test_flash_attn.py"; rc=1; continue; fi
      cp tests/peer/fa3_conftest.py .peer/fa3/conftest.py
      (cd .peer/fa3 && FLASH_ATTENTION_DISABLE_BACKWARD=TRUE ATTNKIT_PEER_SAMPLE=${ATTNKIT_PEER_SAMPLE:-200} \
        python3 -m pytest -q -rfEs -p no:cacheprovider ${PEER_PYTEST_ARGS:-} test_flash_attn.py) > "$LOGS/fa3.log" 2>&1
      ;;
    fla | fla-baseline)
      if [ ! -f .peer/fla/ops/test_gdn.py ]; then echo "missing .peer/fla/ops/test_gdn.py"; rc=1; continue; fi
      swap=$([ "$suite" = fla ] && echo 1 || echo 0)
      # pytest puts the rootdir (.peer/fla) first on sys.path: a fla_swap.py left there would
      # shadow tests/peer's and run fla's own kernels under the attnkit label.
      rm -f .peer/fla/fla_swap.py
      (cd .peer/fla && ATTNKIT_PEER_SWAP=$swap PYTHONPATH="$ROOT/tests/peer${PYTHONPATH:+:$PYTHONPATH}" \
        python3 -m pytest -q -rfEs -p no:cacheprovider -p fla_swap -o log_cli=false ${PEER_PYTEST_ARGS:-} ops/test_gdn.py) \
        > "$LOGS/$suite.log" 2>&1
      ;;
    *) echo "unknown suite $suite"; rc=1; continue ;;
  esac
  if [ "$suite" = fla ] && ! grep -q "gated delta rule: attnkit.fla" "$LOGS/$suite.log"; then
    echo "the fla suite did not run attnkit.fla (see the plugin line of $LOGS/$suite.log)"; rc=1
  fi
  summarise "$LOGS/${suite}.log"
done
exit $rc
