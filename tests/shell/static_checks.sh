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
expect_breach check_dispatch.sh data/batch.cpp 'int f(Device d) { if (d.is_cpu()) return 1; return 2; }' \
  "data/batch.cpp:$(($(lines data/batch.cpp) + 1)): asks is_cpu()"
expect_breach check_dispatch.sh data/batch.cpp \
  'void f(void* d, void* s) { cuda::copy(d, s, 4, cuda::CopyKind::host_to_device, 0); }' \
  "data/batch.cpp:$(($(lines data/batch.cpp) + 1)): calls cuda::"
# The tensor moves bytes through the facade (kernels/device_memory.h) like everyone else: it has
# no exemption left.
expect_breach check_dispatch.sh engine/tensor.cpp 'bool f(Device d) { return d.is_cuda(); }' \
  "engine/tensor.cpp:$(($(lines engine/tensor.cpp) + 1)): asks is_cuda()"
# A listed policy excuses its one line, not the same text elsewhere.
expect_breach check_dispatch.sh models/train/run_dir.cpp '  if (!device.is_cuda()) return 2;' \
  "models/train/run_dir.cpp:$(($(lines models/train/run_dir.cpp) + 1)): asks is_cuda()"

# CHECK FILE TEXT: with TEXT appended to FILE, CHECK must still pass.
expect_pass() {
  local check=$1 file=$2 text=$3
  fresh_copy
  printf '%s\n' "$text" >>"$tmp/tree/$file"
  "$tmp/tree/tools/$check" >"$tmp/out" 2>&1 ||
    fail "$check refused '$text' in $file: $(head -n 3 "$tmp/out")"
}
# A comment that names a CUDA call is not one.
expect_pass check_dispatch.sh data/batch.cpp '// cuda::copy(...) is what upload_async queues on a GPU'
# The dispatch layer, and CUDA code in a cuda/ folder, ask devices and call CUDA.
expect_pass check_dispatch.sh kernels/cpu/device_memory.cpp 'bool f(Device d) { return d.is_cuda(); }'
expect_pass check_dispatch.sh engine/distributed/comm/cuda/nccl_communicator.cpp \
  'int f() { return cuda::device_count(); }'
echo "static checks: all steps passed"
