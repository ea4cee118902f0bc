#!/usr/bin/env bash
# tests/shell/cli_smoke.sh BAREYOLO MODEL_YAML — the detector commands end to end on a tiny
# built-in dataset: make-shapes, data-check, init, grads, val (with --save-json), predict.
# Each step must succeed and leave the files it promises.
set -euo pipefail
bareyolo=$1 cfg=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$bareyolo" make-shapes --out "$work/shapes" --n-train 8 --n-val 4 --imgsz 96 --classes 3
"$bareyolo" data-check --data "$work/shapes/data.yaml"
"$bareyolo" init --cfg "$cfg" --nc 3 --seed 1 --out "$work/w.safetensors"
"$bareyolo" val --cfg "$cfg" --weights "$work/w.safetensors" --data "$work/shapes/data.yaml" \
  --imgsz 64 --batch 2 --save-json "$work/det.json" | tee "$work/val.txt"
grep -q "^ *all  *4 " "$work/val.txt"
grep -q '"image_id"' "$work/det.json" || grep -q '^\[\]$' "$work/det.json"
"$bareyolo" predict --cfg "$cfg" --weights "$work/w.safetensors" --source "$work/shapes/images/val" \
  --imgsz 64 --conf 0.001 --out "$work/pred" --names "$work/shapes/data.yaml"
test "$(ls "$work/pred"/*.jpg | wc -l)" -eq 4
test -s "$work/pred/detections.json"
echo "cli smoke: all steps passed"
