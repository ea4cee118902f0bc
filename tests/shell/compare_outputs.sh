#!/usr/bin/env bash
# tests/shell/compare_outputs.sh — tools/compare_outputs.py, which tools/gpu_check.sh trusts to
# tell a GPU result from the CPU's: equal outputs pass (the same bits, or within a tolerance),
# other outputs fail, and detections whose scores tie may come in either order.
set -uo pipefail
tool="$(cd "$(dirname "$0")/../.." && pwd)/tools/compare_outputs.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "compare_outputs: FAIL: $*"; exit 1; }
expect() {  # STATUS COMMAND...: the tool's exit status must be STATUS
  local want=$1
  shift
  python3 "$tool" "$@" >"$tmp/out" 2>&1
  local got=$?
  [ "$got" -eq "$want" ] || fail "$* exited $got, expected $want: $(tail -n 1 "$tmp/out")"
}

expect 0 make-batch "$tmp/a.safetensors" --images 2 --imgsz 32 --seed 1
expect 0 make-batch "$tmp/b.safetensors" --images 2 --imgsz 32 --seed 2
expect 0 same-bits "$tmp/a.safetensors" "$tmp/a.safetensors"
expect 1 same-bits "$tmp/a.safetensors" "$tmp/b.safetensors"
expect 0 tensors "$tmp/a.safetensors" "$tmp/a.safetensors"
expect 1 tensors "$tmp/a.safetensors" "$tmp/b.safetensors"  # other random images
expect 0 tensors --prefix targets --rtol 10 "$tmp/a.safetensors" "$tmp/b.safetensors"
# bf16 GPU CPU_BF16 CPU_FLOAT: measured by the CPU's bf16-vs-float distance
expect 0 bf16 --prefix images "$tmp/b.safetensors" "$tmp/b.safetensors" "$tmp/a.safetensors"
expect 0 bf16 --prefix images "$tmp/a.safetensors" "$tmp/b.safetensors" "$tmp/a.safetensors"
expect 1 bf16 --prefix images "$tmp/b.safetensors" "$tmp/a.safetensors" "$tmp/a.safetensors"
expect 1 bf16 --prefix images --factor 0.5 "$tmp/a.safetensors" "$tmp/b.safetensors" "$tmp/a.safetensors"

cat >"$tmp/a.json" <<'JSON'
[{"image_id": 1, "category_id": 0, "bbox": [1, 2, 3, 4], "score": 0.5},
 {"image_id": 1, "category_id": 1, "bbox": [5, 5, 3, 4], "score": 0.5},
 {"image_id": 2, "category_id": 0, "bbox": [1, 1, 1, 1], "score": 0.3}]
JSON
cat >"$tmp/b.json" <<'JSON'
[{"image_id": 1, "category_id": 1, "bbox": [5, 5, 3, 4.2], "score": 0.5},
 {"image_id": 1, "category_id": 0, "bbox": [1, 2, 3, 4], "score": 0.5004},
 {"image_id": 2, "category_id": 0, "bbox": [1, 1, 1, 1], "score": 0.3}]
JSON
expect 0 detections "$tmp/a.json" "$tmp/b.json"
sed 's/"score": 0.3}/"score": 0.31}/' "$tmp/b.json" >"$tmp/c.json"
expect 1 detections "$tmp/a.json" "$tmp/c.json"
echo '[]' >"$tmp/empty.json"
expect 1 detections "$tmp/empty.json" "$tmp/empty.json"  # nothing compared is no evidence

printf '%22s %11s %11s %11s %11s %11s %11s\n' all 16 40 0.5 0.25 0.125 0.0625 >"$tmp/a.log"
printf '%22s %11s %11s %11s %11s %11s %11s\n' all 16 40 0.5 0.25 0.1255 0.0625 >"$tmp/b.log"
printf '%22s %11s %11s %11s %11s %11s %11s\n' all 16 40 0.5 0.25 0.135 0.0625 >"$tmp/c.log"
expect 0 val-metrics "$tmp/a.log" "$tmp/b.log"
expect 1 val-metrics "$tmp/a.log" "$tmp/c.log"
echo "compare_outputs: all steps passed"
