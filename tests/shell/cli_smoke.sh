#!/usr/bin/env bash
# tests/shell/cli_smoke.sh BAREYOLO MODEL_YAML — the detector commands end to end on a tiny
# built-in dataset: make-shapes (and a moved copy), data-check, init, convert (bf16), val (with
# --save-json), predict (its labels/*.txt and detections.json agreeing: predict_labels_check.py).
# Each step must succeed and leave the files it promises.
set -euo pipefail
bareyolo=$1 cfg=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$bareyolo" make-shapes --out "$work/shapes" --n-train 8 --n-val 4 --imgsz 96 --classes 3
"$bareyolo" data-check --data "$work/shapes/data.yaml"
# The yaml names its folder absolutely (YOLOv5 opens it as written); moved, it still opens from
# its own folder, with a warning saying so.
grep -qx "path: $(cd "$work/shapes" && pwd -P)" "$work/shapes/data.yaml"
mv "$work/shapes" "$work/moved"
"$bareyolo" data-check --data "$work/moved/data.yaml" 2>"$work/moved.txt"
grep -q "does not exist (was the dataset moved?); using the yaml's own folder" "$work/moved.txt"
mv "$work/moved" "$work/shapes"
"$bareyolo" init --cfg "$cfg" --nc 3 --seed 1 --out "$work/w.safetensors"
# bf16 weights: about half the file, and val reads them like fp32 ones.
"$bareyolo" convert --weights "$work/w.safetensors" --dtype bf16 --out "$work/w16.safetensors" |
  grep -q "floating ones as bf16"
test $(($(stat -c %s "$work/w16.safetensors") * 10)) -lt $(($(stat -c %s "$work/w.safetensors") * 6))
"$bareyolo" val --cfg "$cfg" --weights "$work/w16.safetensors" --data "$work/shapes/data.yaml" \
  --imgsz 64 --batch 2 --noplots | grep -q "^ *all  *4 "
"$bareyolo" val --cfg "$cfg" --weights "$work/w.safetensors" --data "$work/shapes/data.yaml" \
  --imgsz 64 --batch 2 --save-json "$work/det.json" --project "$work/val" | tee "$work/val.txt"
# val's pictures in a numbered folder of --project, as YOLOv5's val.py leaves them.
for picture in PR_curve.png F1_curve.png P_curve.png R_curve.png confusion_matrix.png \
  val_batch0_labels.jpg val_batch0_pred.jpg; do
  test -s "$work/val/exp/$picture"
done
"$bareyolo" val --cfg "$cfg" --weights "$work/w.safetensors" --data "$work/shapes/data.yaml" \
  --imgsz 64 --batch 2 --project "$work/val" >/dev/null
test -s "$work/val/exp2/PR_curve.png"
grep -q "^ *all  *4 " "$work/val.txt"
grep -q '"image_id"' "$work/det.json" || grep -q '^\[\]$' "$work/det.json"
# A numeric image name too long for an int64 stays a string id (it once failed in std::stoll,
# after the whole validation, and the JSON was lost).
long=1234567890123456789012345
mv "$work/shapes/images/val/000000.jpg" "$work/shapes/images/val/$long.jpg"
mv "$work/shapes/labels/val/000000.txt" "$work/shapes/labels/val/$long.txt"
"$bareyolo" val --cfg "$cfg" --weights "$work/w.safetensors" --data "$work/shapes/data.yaml" \
  --imgsz 64 --batch 2 --save-json "$work/long.json" --noplots >/dev/null
grep -q "\"image_id\": *\"$long\"" "$work/long.json"
mv "$work/shapes/images/val/$long.jpg" "$work/shapes/images/val/000000.jpg"
mv "$work/shapes/labels/val/$long.txt" "$work/shapes/labels/val/000000.txt"
"$bareyolo" predict --cfg "$cfg" --weights "$work/w.safetensors" --source "$work/shapes/images/val" \
  --imgsz 64 --conf 0.001 --out "$work/pred" --names "$work/shapes/data.yaml"
test "$(ls "$work/pred"/*.jpg | wc -l)" -eq 4
test -s "$work/pred/detections.json"
# detect.py's options: --save-txt --save-conf write labels/<image>.txt as "class cx cy w h
# conf", normalised; --classes and --max-det limit them; --nosave draws nothing.
"$bareyolo" predict --cfg "$cfg" --weights "$work/w.safetensors" --source "$work/shapes/images/val" \
  --imgsz 64 --conf 0.001 --out "$work/txt" --save-txt --save-conf --nosave --classes 0 2 \
  --max-det 5 >/dev/null
# (an image without detections gets no file, as in detect.py)
test "$(ls "$work/txt"/labels/*.txt | wc -l)" -ge 1
test -z "$(ls "$work/txt"/*.jpg 2>/dev/null)"
cat "$work/txt"/labels/*.txt | awk '
  NF != 6 || ($1 != 0 && $1 != 2) { print "bad label line: " $0; bad = 1 }
  { for (i = 2; i <= 6; ++i) if ($i < 0 || $i > 1) { print "not normalised: " $0; bad = 1 } }
  END { if (NR == 0) { print "no label lines"; bad = 1 } exit bad }'
for file in "$work/txt"/labels/*.txt; do test "$(wc -l < "$file")" -le 5; done
python3 "$(dirname "$0")/predict_labels_check.py" "$work/txt" "$work/shapes/images/val"
# No detection above --conf 0.99 (the weights are fresh): no label file at all.
"$bareyolo" predict --cfg "$cfg" --weights "$work/w.safetensors" --source "$work/shapes/images/val" \
  --imgsz 64 --conf 0.99 --out "$work/none" --save-txt --nosave >/dev/null
grep -qx '\[\]' "$work/none/detections.json"
test -z "$(ls -A "$work/none/labels" 2>/dev/null)"
"$bareyolo" predict --cfg "$cfg" --weights "$work/w.safetensors" --source "$work/shapes/images/val" \
  --imgsz 64 --conf 0.001 --out "$work/plain" --save-txt --hide-labels --line-thickness 1 >/dev/null
awk 'NF != 5 { print "with --save-txt alone a line has 5 fields: " $0; exit 1 }' \
  "$work/plain"/labels/*.txt
test "$(ls "$work/plain"/*.jpg | wc -l)" -eq 4
# An unreadable file in the folder is skipped with a warning; the rest still gets predicted.
mkdir "$work/mixed"
cp "$work/shapes/images/val/000000.jpg" "$work/mixed/"
echo "not a jpeg" > "$work/mixed/broken.jpg"
"$bareyolo" predict --cfg "$cfg" --weights "$work/w.safetensors" --source "$work/mixed" \
  --imgsz 64 --conf 0.001 --out "$work/pred2" | tee "$work/pred2.txt"
grep -q "^warning: skipped cannot decode image $work/mixed/broken.jpg" "$work/pred2.txt"
grep -q "1 of 2 images skipped" "$work/pred2.txt"
test -s "$work/pred2/detections.json" && test -s "$work/pred2/000000.jpg"

# Options a command cannot honour are refused in one readable line (no 309-digit DBL_MAX).
source "$(dirname "$0")/refuses.sh"
refuses "'trace' is not a bareyolo command; did you mean trace-summary?" "$bareyolo" trace --help
refuses "'trace' is not a bareyolo command; did you mean trace-summary?" "$bareyolo" trace
refuses "'trian' is not a bareyolo command (bareyolo --help lists them)" "$bareyolo" trian
refuses "--batch: must be a positive number or -1 (AutoBatch), got '0'" "$bareyolo" train --batch 0
refuses "--epochs: must be a positive number, got '0'" "$bareyolo" train --epochs 0
refuses "--epochs: must be a positive number, got '3x'" "$bareyolo" train --epochs 3x
refuses "--cache: must be one of ram, disk, got 'tape'" "$bareyolo" train --cache tape
refuses "--seed: must be a number >= 0, got '-1'" "$bareyolo" train --seed -1
refuses "--nc: must be a number >= 0, got '-3'" "$bareyolo" init --cfg "$cfg" --nc -3 --out "$work/x"
refuses "--seed: must be a number >= 0" "$bareyolo" make-shapes --out "$work/s2" --seed -5
refuses "has no 'test' split to validate on" "$bareyolo" val --cfg "$cfg" --weights "$work/w.safetensors" \
  --data "$work/shapes/data.yaml" --split test
echo "cli smoke: all steps passed"
