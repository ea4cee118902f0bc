#!/usr/bin/env bash
# tests/shell/outputs_cli.sh BAREYOLO MODEL_YAML — what the weights and image commands write
# (issue 52): predict keeps --source's subfolders under --out and never draws over an input;
# convert, export and grads never write over their inputs; weights holding NaN or infinity are
# refused by every command that reads them, naming the tensor; convert --dtype fp32 turns F16
# weights into F32; grads refuses non-finite images and a step that overflows, --amp and --nc
# change its step, init's --seed its weights. Every refusal must come before anything is written.
set -euo pipefail
bareyolo=$(realpath "$1") cfg=$(realpath "$2")
edit="python3 $(realpath "$(dirname "$0")")/outputs_edit_safetensors.py"
source "$(dirname "$0")/refuses.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# `predict WEIGHTS ARGS...`: predict with the tiny model and those weights.
predict() { "$bareyolo" predict --cfg "$cfg" --imgsz 64 --conf 0.001 --weights "$@"; }

"$bareyolo" make-shapes --out shapes --n-train 2 --n-val 3 --imgsz 96 --classes 3 >/dev/null
"$bareyolo" init --cfg "$cfg" --nc 3 --seed 1 --out w.safetensors >/dev/null

# ---- predict: two subfolders' x.jpg keep their own copies and ids ----
mkdir -p src/a src/b
cp shapes/images/val/000000.jpg src/a/x.jpg
cp shapes/images/val/000001.jpg src/b/x.jpg
cp shapes/images/val/000002.jpg src/top.jpg
predict w.safetensors --source src --out out >/dev/null
test -s out/a/x.jpg && test -s out/b/x.jpg && test -s out/top.jpg
ids=$(python3 -c 'import json, sys
print(" ".join(sorted({str(d["image_id"]) for d in json.load(open("out/detections.json"))})))')
[ "$ids" = "a/x b/x top" ] || { echo "detections.json image ids: '$ids', want 'a/x b/x top'"; exit 1; }

# ---- predict never draws over an input ----
md5sum src/a/x.jpg src/b/x.jpg src/top.jpg > inputs.md5
refuses "the drawn copy of 'src/a/x.jpg' would be written to 'src/a/x.jpg', which is the --source image 'src/a/x.jpg'" \
  predict w.safetensors --source src --out src
refuses "which is the --source image 'src/a/x.jpg'" predict w.safetensors --source src/a/x.jpg --out src/a
ln -s src linked  # the same folder by another name: files are compared, not path strings
refuses "would be written to 'linked/a/x.jpg', which is the --source image 'src/a/x.jpg'" \
  predict w.safetensors --source src --out linked
# --out inside --source: src/a's x.jpg would land on src/a/a/x.jpg, an input too.
mkdir src/a/a && cp src/b/x.jpg src/a/a/x.jpg && md5sum src/a/a/x.jpg >> inputs.md5
refuses "would be written to 'src/a/a/x.jpg', which is the --source image 'src/a/a/x.jpg'" \
  predict w.safetensors --source src/a --out src/a/a
rm -r src/a/a && sed -i '/src\/a\/a\/x.jpg/d' inputs.md5
# Two images one output (x.png and x.jpg are both drawn as x.jpg): refused, out2 never made.
cp src/a/x.jpg src/a/x.png
refuses "would both be written to 'out2/a/x.jpg'" predict w.safetensors --source src --out out2
test ! -e out2 || { echo "out2 was created by a refused predict"; exit 1; }
rm src/a/x.png
refuses "the --save-raw file would be written to 'w.safetensors', which is the --weights file" \
  predict w.safetensors --source src --out out3 --save-raw w.safetensors
refuses "--out 'src/top.jpg' is a file; predict writes a folder" \
  predict w.safetensors --source src --out src/top.jpg
md5sum -c --quiet inputs.md5

# ---- convert and grads never write over their inputs ----
md5sum w.safetensors > weights.md5
refuses "the --out file would be written to 'w.safetensors', which is the --weights file" \
  "$bareyolo" convert --weights w.safetensors --dtype bf16 --out w.safetensors
refuses "the --out file would be written to 'w.safetensors', which is the --weights file" \
  "$bareyolo" export --cfg "$cfg" --weights w.safetensors --imgsz 64 --out w.safetensors
$edit batch batch.safetensors 0.5
refuses "which is the --batch file" "$bareyolo" grads --cfg "$cfg" --weights w.safetensors \
  --batch batch.safetensors --out batch.safetensors
md5sum -c --quiet weights.md5

# ---- convert --dtype fp32 does what it says on F16 weights ----
$edit to-f16 w.safetensors w16.safetensors
[ "$($edit dtypes w16.safetensors)" = "F16 I64" ]
"$bareyolo" convert --weights w16.safetensors --dtype fp32 --out w32.safetensors | grep -qF "F32"
[ "$($edit dtypes w32.safetensors)" = "F32 I64" ] || { echo "convert fp32 wrote $($edit dtypes w32.safetensors)"; exit 1; }
"$bareyolo" val --cfg "$cfg" --weights w32.safetensors --data shapes/data.yaml --imgsz 64 >/dev/null

# ---- weights holding NaN or infinity: every reader refuses, naming the tensor ----
$edit set w.safetensors nan.safetensors model.2.cv1.conv.weight 7 nan
damaged="nan.safetensors: tensor 'model.2.cv1.conv.weight' holds 1 non-finite value (NaN or infinity)"
refuses "$damaged" predict nan.safetensors --source src --out out4
refuses "$damaged" "$bareyolo" val --cfg "$cfg" --weights nan.safetensors --data shapes/data.yaml --imgsz 64
refuses "$damaged" "$bareyolo" convert --weights nan.safetensors --out converted.safetensors
refuses "$damaged" "$bareyolo" grads --cfg "$cfg" --weights nan.safetensors --batch batch.safetensors --out g.safetensors
refuses "the weights file is damaged" "$bareyolo" train --cfg "$cfg" --data shapes/data.yaml \
  --weights nan.safetensors --epochs 1 --imgsz 64 --batch 2 --device cpu --project runs
if [ -x "$(dirname "$bareyolo")/bareyolo-export" ]; then  # built where libonnx-dev is
  refuses "$damaged" "$bareyolo" export --cfg "$cfg" --weights nan.safetensors --imgsz 64 --out m.onnx
fi
test ! -e out4 && test ! -e converted.safetensors && test ! -e g.safetensors && test ! -e m.onnx

# ---- grads: non-finite images, and a step that overflows, exit non-zero with nothing written ----
"$bareyolo" grads --cfg "$cfg" --weights w.safetensors --batch batch.safetensors --out g.safetensors >fp32.txt
# --amp is the bf16 step: a loss of its own, within a few percent of float32's.
"$bareyolo" grads --cfg "$cfg" --weights w.safetensors --batch batch.safetensors --out g.safetensors \
  --amp >amp.txt
total() { sed -n 's/.* total \([0-9.e+-]*\)$/\1/p' "$1"; }
python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(not (a != b and abs(a - b) < 0.05 * a))' \
  "$(total fp32.txt)" "$(total amp.txt)" ||
  { echo "grads --amp: total $(total amp.txt) against float32's $(total fp32.txt)"; exit 1; }
rm g.safetensors
# --nc is the model's: 5 classes do not load 3-class weights.
refuses "w.safetensors: 'model.24.m.0.weight' has shape [24, 16, 1, 1], the model expects [30, 16, 1, 1]" \
  "$bareyolo" grads --cfg "$cfg" --weights w.safetensors --batch batch.safetensors --nc 5 --out g.safetensors
$edit batch nan_batch.safetensors nan
refuses "nan_batch.safetensors: 'images': image 0, channel 0, y 0, x 0 is nan" \
  "$bareyolo" grads --cfg "$cfg" --weights w.safetensors --batch nan_batch.safetensors --out g.safetensors
$edit set w.safetensors huge.safetensors model.24.m.0.weight 0 3e38
refuses "the step overflowed on finite weights and images" \
  "$bareyolo" grads --cfg "$cfg" --weights huge.safetensors --batch batch.safetensors --out g.safetensors
test ! -e g.safetensors

# ---- init: --seed draws the weights, the same seed the same file ----
"$bareyolo" init --cfg "$cfg" --nc 3 --seed 1 --out again.safetensors >/dev/null
"$bareyolo" init --cfg "$cfg" --nc 3 --seed 2 --out other.safetensors >/dev/null
cmp -s w.safetensors again.safetensors || { echo "init --seed 1 twice wrote two files"; exit 1; }
if cmp -s w.safetensors other.safetensors; then echo "init --seed 2 wrote seed 1's file"; exit 1; fi

# ---- init: an nc whose Detect width overflows an int is refused with the range ----
refuses "nc 2147483647 is out of range: a model takes 1 to 200000 classes" \
  "$bareyolo" init --cfg "$cfg" --nc 2147483647 --out big.safetensors
echo "outputs cli: all steps passed"
