#!/usr/bin/env bash
# tests/shell/check_run.sh [--status N] [--expect REGEX]... [--positive KEY]... -- COMMAND ARGS...
# Runs COMMAND (its output passes through) and fails unless all of these hold:
#   its exit status is N (0 unless given);
#   each REGEX (grep -E) matches a line of its output;
#   each KEY appears in its last "RESULT key=value ..." line with a finite value > 0.
# ctest's PASS_REGULAR_EXPRESSION alone would ignore the exit status, and a RESULT line of
# nan or 0 would pass it; smoke tests of the benches and examples go through this instead.
set -uo pipefail
want_status=0 expects=() positives=()
while [ $# -gt 0 ]; do
  case $1 in
    --status) want_status=$2; shift 2 ;;
    --expect) expects+=("$2"); shift 2 ;;
    --positive) positives+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "check_run: unknown option '$1' (options end with --)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "check_run: no command after --" >&2; exit 2; }

output=$(mktemp)
trap 'rm -f "$output"' EXIT
"$@" 2>&1 | tee "$output"
status=${PIPESTATUS[0]}
failed=0
if [ "$status" -ne "$want_status" ]; then
  echo "check_run: FAILED: '$1' exited with $status, expected $want_status"
  failed=1
fi
for regex in "${expects[@]+"${expects[@]}"}"; do
  if ! grep -Eq -- "$regex" "$output"; then
    echo "check_run: FAILED: no line of the output matches '$regex'"
    failed=1
  fi
done
if [ ${#positives[@]} -gt 0 ]; then
  result=$(grep '^RESULT ' "$output" | tail -n 1)
  if [ -z "$result" ]; then
    echo "check_run: FAILED: the output has no RESULT line"
    failed=1
  fi
  for key in "${positives[@]}"; do
    value=$(tr ' ' '\n' <<<"$result" | sed -n "s/^$key=//p")
    # awk reads "nan", "inf" and text as 0 or as themselves; only a finite number > 0 passes.
    if ! awk -v v="$value" 'BEGIN { exit !(v ~ /^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/ && v + 0 > 0) }'; then
      echo "check_run: FAILED: RESULT $key='$value' is not a finite number > 0"
      failed=1
    fi
  done
fi
[ $failed -eq 0 ] && echo "check_run: ok (exit $status${positives[*]:+; ${positives[*]} finite and > 0})"
exit $failed
