#!/usr/bin/env bash
# tests/shell/torch_weights.sh BAREYOLO — PyTorch YOLOv5 checkpoints on the command line (issue
# 54), with the v7.0 checkpoints of tests/fixtures/torch: convert keeps the values as stored
# (F16 stays F16) or widens them exactly; predict needs no --cfg; a fine-tune to another class
# count transfers every tensor but the class rows, saying so as YOLOv5 does; best and last are
# stripped to fp16 at the end, and an unfinished fine-tune resumes without its .pt; a hostile
# pickle is refused naming its global.
set -euo pipefail
bareyolo=$(realpath "$1")
fixtures=$(realpath "$(dirname "$0")/../fixtures/torch")
edit="python3 $(realpath "$(dirname "$0")")/outputs_edit_safetensors.py"
source "$(dirname "$0")/refuses.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "torch weights: $*" >&2; exit 1; }

"$bareyolo" convert --weights "$fixtures/best.pt" --out best.safetensors | grep -qF "as stored" ||
  fail "convert did not keep the dtypes"
[ "$($edit dtypes best.safetensors)" = "F16 I64" ] || fail "convert wrote $($edit dtypes best.safetensors)"
"$bareyolo" convert --weights "$fixtures/best.pt" --dtype fp32 --out best32.safetensors >/dev/null
[ "$($edit dtypes best32.safetensors)" = "F32 I64" ] || fail "convert fp32 wrote $($edit dtypes best32.safetensors)"

"$bareyolo" make-shapes --out shapes --n-train 8 --n-val 2 --imgsz 64 --classes 2 >/dev/null
"$bareyolo" predict --weights "$fixtures/best.pt" --source shapes/images/val --imgsz 64 \
  --out pred >/dev/null || fail "predict without --cfg failed"
test -s pred/detections.json || fail "predict wrote no detections.json"

out=$("$bareyolo" train --data shapes/data.yaml --weights "$fixtures/epoch0.pt" --epochs 1 \
  --batch 4 --imgsz 64 --project runs --name ft 2>&1) || fail "fine-tune failed: $out"
grep -qF "Transferred 343/349 items from $fixtures/epoch0.pt" <<<"$out" ||
  fail "no transfer line in: $out"
# Stripped at the end as YOLOv5 strips them: best and last hold fp16 weights alone.
for f in best last; do
  [ "$($edit dtypes runs/ft/weights/$f.safetensors)" = "F16 I64" ] ||
    fail "$f.safetensors holds $($edit dtypes runs/ft/weights/$f.safetensors)"
  ! grep -aqF '"optimizer.' runs/ft/weights/$f.safetensors || fail "optimizer state in $f"
done
# bareyolo's own weights carry the model (its yaml) too: val without --cfg.
"$bareyolo" val --weights runs/ft/weights/best.safetensors --data shapes/data.yaml --imgsz 64 \
  >/dev/null || fail "val of the fine-tuned weights without --cfg failed"

# An unfinished fine-tune resumes from its checkpoint alone: the model yaml is in it.
cp "$fixtures/best.pt" start.pt
"$bareyolo" train --data shapes/data.yaml --weights start.pt --epochs 2 --batch 4 --imgsz 64 \
  --project runs --name cut --max-steps 1 >/dev/null 2>&1 || fail "the cut fine-tune failed"
rm start.pt
"$bareyolo" train --resume runs/cut/weights/last.safetensors >/dev/null 2>&1 ||
  fail "resuming a fine-tune whose .pt is gone failed"
test -s runs/cut/weights/final.safetensors || fail "the resumed fine-tune did not finish"

refuses "refused global 'posix.system'" "$bareyolo" convert --weights "$fixtures/hostile/os_system.pt" --out x.safetensors
refuses "segmentation checkpoint" "$bareyolo" predict --weights "$fixtures/hostile/segmentation.pt" --source shapes/images/val
test ! -e x.safetensors || fail "a refused convert wrote its output"
echo "torch weights: all steps passed"
