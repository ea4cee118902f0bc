# tests/shell/refuses.sh — sourced by the shell tests: `refuses TEXT COMMAND...` runs COMMAND and
# fails the test unless it exits non-zero with TEXT in one readable message (under 400
# characters: no 309-digit DBL_MAX, no stack of errors).
refuses() {
  local text=$1 out
  shift
  if out=$("$@" 2>&1); then
    echo "accepted, but should have been refused: $*"
    exit 1
  fi
  grep -qF -- "$text" <<<"$out" || { echo "no '$text' in the refusal of '$*': $out"; exit 1; }
  [ ${#out} -lt 400 ] || { echo "a refusal of ${#out} characters: $out"; exit 1; }
}
