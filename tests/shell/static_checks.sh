#!/usr/bin/env bash
# tests/shell/static_checks.sh — the layer and dispatch checks (tools/check_layers.sh,
# tools/check_dispatch.sh) pass on the tree as it is and fail, naming the file and line, on a
# copy of it with one breach planted at a time.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "static checks: FAIL: $*"; exit 1; }

# A fresh copy of the checked rooms and the two checks.
fresh_copy() {
  rm -rf "$tmp/tree" && mkdir -p "$tmp/tree/tools"
  cp -r "$root/kernels" "$root/engine" "$root/data" "$root/models" "$tmp/tree/"
  cp -r "$root/tools/bareyolo" "$root/tools/selftest" "$tmp/tree/tools/"
  cp "$root/tools/check_layers.sh" "$root/tools/check_dispatch.sh" "$tmp/tree/tools/"
}

# CHECK FILE TEXT WANT: with TEXT appended to FILE, CHECK must fail and print WANT.
expect_breach() {
  local check=$1 file=$2 text=$3 want=$4
  fresh_copy
  printf '%s\n' "$text" >>"$tmp/tree/$file"
  if "$tmp/tree/tools/$check" >"$tmp/out" 2>&1; then
    fail "$check passed with '$text' in $file"
  fi
  grep -qF "$want" "$tmp/out" || fail "$check did not name $want: $(head -n 3 "$tmp/out")"
}

fresh_copy
"$tmp/tree/tools/check_layers.sh" >"$tmp/out" 2>&1 || fail "check_layers: $(cat "$tmp/out")"
"$tmp/tree/tools/check_dispatch.sh" >"$tmp/out" 2>&1 || fail "check_dispatch: $(cat "$tmp/out")"

lines() { wc -l <"$root/$1" | tr -d ' '; }
expect_breach check_layers.sh kernels/cpu/pool.cpp '#include "data/batch.h"' \
  "kernels/cpu/pool.cpp:$(($(lines kernels/cpu/pool.cpp) + 1)): kernels includes data/batch.h"
expect_breach check_layers.sh models/loss/loss.cpp '#include "models/eval/boxes.h"' \
  "models/loss/loss.cpp:$(($(lines models/loss/loss.cpp) + 1)): loss includes"
expect_breach check_dispatch.sh data/batch.h '#ifdef BAREYOLO_WITH_CUDA' \
  "data/batch.h:$(($(lines data/batch.h) + 1)): tests BAREYOLO_WITH_CUDA"
expect_breach check_dispatch.sh models/eval/validate.cpp 'bool f(Device d) { return d.is_cuda(); }' \
  "models/eval/validate.cpp:$(($(lines models/eval/validate.cpp) + 1)): asks is_cuda()"
# The same call is fine where bytes are moved.
fresh_copy
printf '%s\n' 'bool f(Device d) { return d.is_cuda(); }' >>"$tmp/tree/engine/tensor.cpp"
"$tmp/tree/tools/check_dispatch.sh" >"$tmp/out" 2>&1 || fail "is_cuda() in engine/tensor.cpp refused"
echo "static checks: all steps passed"
