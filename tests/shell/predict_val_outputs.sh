#!/usr/bin/env bash
# tests/shell/predict_val_outputs.sh BAREYOLO MODEL_YAML — predict's and val's outputs as
# detect.py's and val.py's users expect them (issue 56): predict writes into numbered folders
# (runs/predict/exp, exp2; --exist-ok reuses exp; --project/--name; --out exactly as given),
# --save-txt into <folder>/labels, --save-crop crops as detect.py cuts and names them
# (predict_crops_check.py), and both commands end with YOLOv5's Speed: line; val --task picks
# the split, and --task speed validates at val.py's benchmark settings, writing no pictures.
set -euo pipefail
bareyolo=$(realpath "$1") cfg=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/refuses.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

"$bareyolo" make-shapes --out shapes --n-train 5 --n-val 3 --imgsz 96 --classes 3 >/dev/null
"$bareyolo" init --cfg "$cfg" --nc 3 --seed 1 --out w.safetensors >/dev/null
mkdir src  # stems that are not numbers, so that detections.json's image ids are the stems
cp shapes/images/val/000000.jpg src/a.jpg
cp shapes/images/val/000001.jpg src/b.jpg
cp shapes/images/val/000002.jpg src/c.jpg
predict() { "$bareyolo" predict --cfg "$cfg" --weights w.safetensors --source src --imgsz 64 "$@"; }

# ---- numbered folders, as detect.py's increment_path ----
predict >first.txt
predict --nosave >/dev/null
predict --exist-ok --save-txt --save-conf --conf 0.001 >/dev/null
test -s runs/predict/exp/a.jpg && test -s runs/predict/exp2/detections.json
test ! -e runs/predict/exp2/a.jpg  # --nosave
test ! -e runs/predict/exp3
test "$(ls runs/predict/exp/labels/*.txt | wc -l)" -eq 3
grep -qx "Results saved to runs/predict/exp" first.txt
predict --project mine --name try --save-txt --conf 0.001 >/dev/null
test "$(ls mine/try/labels/*.txt | wc -l)" -eq 3 && test -s mine/try/b.jpg
refuses "--name '../up': a run name must be one folder name" predict --name ../up
refuses "--project excludes --out" predict --out x --project y
test ! -e x && test ! -e y

# ---- the Speed: line of detect.py (one image at a time) ----
speed='^Speed: [0-9]+\.[0-9]ms pre-process, [0-9]+\.[0-9]ms inference, [0-9]+\.[0-9]ms NMS per image at shape'
grep -Eqx "$speed \(1, 3, 64, 64\)" first.txt || { echo "no Speed: line in:"; cat first.txt; exit 1; }

# ---- --save-crop: one crop per detection, cut and named as detect.py does ----
predict --out crops_run --save-crop --nosave --conf 0.001 --max-det 6 --names shapes/data.yaml \
  >/dev/null
python3 "$here/predict_crops_check.py" crops_run circle rectangle triangle  # data.yaml's names

# ---- val --task and its Speed: line ----
val() { "$bareyolo" val --cfg "$cfg" --weights w.safetensors --data shapes/data.yaml --imgsz 64 \
  --batch 2 --project vals "$@"; }
val --task speed >speed.txt
grep -Eqx "$speed \(2, 3, 64, 64\)" speed.txt || { echo "no Speed: line in:"; cat speed.txt; exit 1; }
grep -q "^ *all  *3 " speed.txt
test ! -e vals  # --task speed draws no pictures
val --task train --noplots | grep -q "^ *all  *5 "
refuses "has no 'test' split to validate on" val --task test
refuses "--task speed validates at val.py's fixed settings" val --task speed --conf 0.1
refuses "val.py's study task" val --task study
refuses "--split excludes --task" val --task val --split val
echo "predict val outputs: all steps passed"
