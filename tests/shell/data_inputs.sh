#!/usr/bin/env bash
# tests/shell/data_inputs.sh BAREYOLO MODEL_YAML — hostile data through the commands: images
# over --max-pixels (data-check, val, predict), a NaN pixel in grads' batch file, and a dataset
# without its labels folder (data-check says so; train refuses before any run directory).
set -euo pipefail
bareyolo=$1 cfg=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/refuses.sh"

# `fails FILE COMMAND...`: COMMAND must exit non-zero; its output goes to FILE for the greps.
fails() {
  local file=$1
  shift
  if "$@" >"$file" 2>&1; then
    echo "accepted, but should have failed: $*"
    exit 1
  fi
}

"$bareyolo" make-shapes --out "$work/shapes" --n-train 4 --n-val 2 --imgsz 64 --classes 2 >/dev/null
data=$work/shapes/data.yaml
image=$work/shapes/images/val/000000.jpg
"$bareyolo" init --cfg "$cfg" --nc 2 --out "$work/w.safetensors" >/dev/null

# --max-pixels: every image over it is a bad image, named, in each command that reads images.
fails "$work/check.txt" "$bareyolo" data-check --data "$data" --max-pixels 4000
grep -qF "$work/shapes/images/train/000003.jpg: unreadable image: 64x64 is 4096 pixels, more than the limit 4000" \
  "$work/check.txt"
grep -q "^train: 0 images, 0 backgrounds, 4 corrupt" "$work/check.txt"
"$bareyolo" data-check --data "$data" --max-pixels 4096 >/dev/null
refuses "the val split has no usable image" "$bareyolo" val --cfg "$cfg" \
  --weights "$work/w.safetensors" --data "$data" --imgsz 64 --max-pixels 4000
refuses "4096 pixels, more than the limit 4000" "$bareyolo" predict --cfg "$cfg" \
  --weights "$work/w.safetensors" --source "$image" --imgsz 64 --out "$work/pred" \
  --max-pixels 4000
refuses "--max-pixels: must be a positive number, got '0'" "$bareyolo" data-check --data "$data" \
  --max-pixels 0

# grads: a NaN pixel in the batch file is refused, named, before the forward.
python3 - "$work/nan.safetensors" <<'PY'
import json, struct, sys
pixels = [0.5] * (3 * 64 * 64)
pixels[5] = float("nan")
images = struct.pack(f"<{len(pixels)}f", *pixels)
targets = struct.pack("<6f", 0, 0, 0.5, 0.5, 0.2, 0.2)
header = json.dumps({
    "images": {"dtype": "F32", "shape": [1, 3, 64, 64], "data_offsets": [0, len(images)]},
    "targets": {"dtype": "F32", "shape": [1, 6],
                "data_offsets": [len(images), len(images) + len(targets)]}}).encode()
with open(sys.argv[1], "wb") as out:
    out.write(struct.pack("<Q", len(header)) + header + images + targets)
PY
refuses "nan.safetensors: 'images': image 0, channel 0, y 0, x 5 is nan, not a finite number" \
  "$bareyolo" grads --cfg "$cfg" --weights "$work/w.safetensors" --batch "$work/nan.safetensors" \
  --out "$work/g.safetensors"
test ! -e "$work/g.safetensors"

# No labels folder: data-check names where it looked; train refuses before any run directory.
rm -r "$work/shapes/labels"
fails "$work/nolabels.txt" "$bareyolo" data-check --data "$data"
grep -qF "$work/shapes/labels/train: no labels: none of the 4 usable images has a label file, and this folder does not exist" \
  "$work/nolabels.txt"
grep -q "^error: the train split has no labels (above): training refuses it" "$work/nolabels.txt"
fails "$work/train.txt" "$bareyolo" train --data "$data" --cfg "$cfg" --epochs 1 --imgsz 64 \
  --batch 2 --device cpu --project "$work/runs"
grep -qF "cannot train on the train split: $work/shapes/labels/train: no labels" "$work/train.txt"
test ! -e "$work/runs"
echo "data inputs: all steps passed"
